// BoxNMSCPU: MXNet's contrib.box_nms for float32 on CPU, with the same output, in less time.
//
// MXNet 1.9's CPU box_nms launches one OpenMP loop per candidate, in score order, over every later candidate, even
// for a candidate already suppressed: topk^2 / 2 steps (72 million for the R-CNN RPN's 12000 proposals in training,
// 1.3-1.8 s per image at short side 800 on 2 cores, 9% of an iteration). Here a suppressed candidate is no
// reference, and a reference's IoUs with the later candidates are one branch-free loop over arrays of their sides,
// which the compiler vectorises. Which boxes survive depends only on the order of the references and on each pair's
// IoU, computed with MXNet's operations, so the output is MXNet's, element for element
// (tests/programs/rcnn/test_cpu_ops.py checks it against mx.nd.contrib.box_nms): valid boxes (score >
// valid_thresh; with id_index, class != background_id) stably sorted by descending score per batch element, the
// first topk of them suppressed greedily (a later box whose IoU with a kept one exceeds overlap_thresh; without
// force_suppress, only within a class), the kept rows first in that order, -1 after.
// The backward pass routes each output row's gradient to the input row it came from, as MXNet's does.
//
// Not supported (the Python side keeps MXNet's operator for them): in_format other than out_format.

#include <algorithm>
#include <string>
#include <vector>

#include "common.h"

using namespace mxnet_ops;

namespace {

struct Params {
  float overlap_thresh = 0.5f, valid_thresh = 0.f;
  int topk = -1, coord_start = 2, score_index = 1, id_index = -1, background_id = -1;
  bool force_suppress = false, center = false;
};

bool parse(const Attrs& attrs, Params* p) {
  p->overlap_thresh = float_attr(attrs, "overlap_thresh", 0.5f);
  p->valid_thresh = float_attr(attrs, "valid_thresh", 0.f);
  p->topk = int_attr(attrs, "topk", -1);
  p->coord_start = int_attr(attrs, "coord_start", 2);
  p->score_index = int_attr(attrs, "score_index", 1);
  p->id_index = int_attr(attrs, "id_index", -1);
  p->background_id = int_attr(attrs, "background_id", -1);
  p->force_suppress = bool_attr(attrs, "force_suppress", false);
  const std::string in_format = attr(attrs, "in_format", "corner"), out_format = attr(attrs, "out_format", "corner");
  if (in_format != out_format || (in_format != "corner" && in_format != "center")) {
    MX_ERROR_MSG << "BoxNMSCPU: in_format and out_format must be the same, corner or center; got " << in_format
                 << " and " << out_format;
    return false;
  }
  p->center = in_format == "center";
  return true;
}

bool check_width(const Params& p, int64_t width) {
  const int last = p.coord_start + 3;
  const bool ok = width >= (p.id_index >= 0 ? 6 : 5) && p.score_index >= 0 && p.score_index < width &&
                  (p.score_index < p.coord_start || p.score_index > last) && p.coord_start >= 0 && last < width &&
                  (p.id_index < 0 || (p.id_index < width && (p.id_index < p.coord_start || p.id_index > last) &&
                                      p.id_index != p.score_index));
  if (!ok) MX_ERROR_MSG << "BoxNMSCPU: score_index, coord_start or id_index out of range or overlapping";
  return ok;
}

// The rows of one batch element that survive, in output order.
std::vector<int> kept_rows(const float* rows, int num, int width, const Params& p) {
  std::vector<int> order;
  order.reserve(num);
  for (int i = 0; i < num; i++) {
    const float* row = rows + static_cast<size_t>(i) * width;
    const bool valid = p.id_index >= 0 ? (row[p.score_index] > p.valid_thresh &&
                                          row[p.id_index] != static_cast<float>(p.background_id))
                                       : row[p.score_index] > p.valid_thresh;
    if (valid) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return rows[static_cast<size_t>(a) * width + p.score_index] > rows[static_cast<size_t>(b) * width + p.score_index];
  });
  const int n = p.topk < 0 ? static_cast<int>(order.size()) : std::min(static_cast<int>(order.size()), p.topk);
  order.resize(n);
  // The candidates' sides and areas, one array each (the inner loop below vectorises), with MXNet's operations:
  // Intersect's left/right (corner: x1/x2; center: cx -/+ w / 2) and BoxArea.
  std::vector<float> left(n), right(n), top(n), bottom(n), areas(n);
  std::vector<int> ids(n, 0);
  for (int k = 0; k < n; k++) {
    const float* box = rows + static_cast<size_t>(order[k]) * width + p.coord_start;
    if (p.center) {
      const float half_w = box[2] / 2, half_h = box[3] / 2;
      left[k] = box[0] - half_w, right[k] = box[0] + half_w, top[k] = box[1] - half_h, bottom[k] = box[1] + half_h;
    } else {
      left[k] = box[0], right[k] = box[2], top[k] = box[1], bottom[k] = box[3];
    }
    const float box_w = p.center ? box[2] : box[2] - box[0];
    const float box_h = p.center ? box[3] : box[3] - box[1];
    areas[k] = (box_w < 0 || box_h < 0) ? 0.f : box_w * box_h;
    if (p.id_index >= 0) ids[k] = static_cast<int>(rows[static_cast<size_t>(order[k]) * width + p.id_index]);
  }
  const bool per_class = !p.force_suppress && p.id_index >= 0;
  std::vector<unsigned char> removed(n, 0);
  for (int ref = 0; ref < n; ref++) {
    if (removed[ref]) continue;  // MXNet still visits every later candidate for it, and does nothing
    const float l = left[ref], r = right[ref], t = top[ref], b = bottom[ref], a = areas[ref];
    const int id = ids[ref];
    // Every later candidate's IoU with the reference, also for those already removed (they stay removed), so
    // that the loop has no branch: the same values as MXNet's for the pairs it compares.
    for (int pos = ref + 1; pos < n; pos++) {
      const float x_left = l > left[pos] ? l : left[pos], x_right = r < right[pos] ? r : right[pos];
      const float y_top = t > top[pos] ? t : top[pos], y_bottom = b < bottom[pos] ? b : bottom[pos];
      float w = x_right - x_left, h = y_bottom - y_top;
      w = w > 0 ? w : 0.f;
      h = h > 0 ? h : 0.f;
      float intersect = w;
      intersect *= h;
      const float iou = intersect / (a + areas[pos] - intersect);
      removed[pos] |= static_cast<unsigned char>((iou > p.overlap_thresh) & (!per_class | (ids[pos] == id)));
    }
  }
  std::vector<int> kept;
  for (int k = 0; k < n; k++) {
    if (!removed[k]) kept.push_back(order[k]);
  }
  return kept;
}

struct Layout {
  int64_t batches, num, width;
};

Layout layout(const MXTensor& data) {
  const size_t ndim = data.shape.size();
  Layout l{1, data.shape[ndim - 2], data.shape[ndim - 1]};
  for (size_t d = 0; d + 2 < ndim; d++) l.batches *= data.shape[d];
  return l;
}

MXReturnValue forward(const Attrs& attrs, std::vector<MXTensor>* inputs, std::vector<MXTensor>* outputs,
                      const OpResource&) {
  Params p;
  if (!parse(attrs, &p)) return MX_FAIL;
  const MXTensor& data = inputs->at(0);
  const Layout l = layout(data);
  if (!check_width(p, l.width)) return MX_FAIL;
  const float* in = floats(data);
  float* out = outputs->at(0).data<float>();
  std::fill(out, out + l.batches * l.num * l.width, -1.f);
#pragma omp parallel for schedule(dynamic)
  for (int64_t b = 0; b < l.batches; b++) {
    const float* rows = in + b * l.num * l.width;
    const std::vector<int> kept = kept_rows(rows, static_cast<int>(l.num), static_cast<int>(l.width), p);
    float* dst = out + b * l.num * l.width;
    for (size_t k = 0; k < kept.size(); k++) {
      std::copy(rows + kept[k] * l.width, rows + (kept[k] + 1) * l.width, dst + k * l.width);
    }
  }
  return MX_SUCCESS;
}

// inputs: the output's gradient, data, the output; output: data's gradient.
MXReturnValue backward(const Attrs& attrs, std::vector<MXTensor>* inputs, std::vector<MXTensor>* outputs,
                       const OpResource&) {
  Params p;
  if (!parse(attrs, &p)) return MX_FAIL;
  const MXTensor& data = inputs->at(1);
  const Layout l = layout(data);
  const float* grad_out = floats(inputs->at(0));
  const float* in = floats(data);
  float* grad_in = outputs->at(0).data<float>();
  std::fill(grad_in, grad_in + l.batches * l.num * l.width, 0.f);
#pragma omp parallel for schedule(dynamic)
  for (int64_t b = 0; b < l.batches; b++) {
    const std::vector<int> kept = kept_rows(in + b * l.num * l.width, static_cast<int>(l.num),
                                            static_cast<int>(l.width), p);
    const float* src = grad_out + b * l.num * l.width;
    float* dst = grad_in + b * l.num * l.width;
    for (size_t k = 0; k < kept.size(); k++) {
      std::copy(src + k * l.width, src + (k + 1) * l.width, dst + kept[k] * l.width);
    }
  }
  return MX_SUCCESS;
}

MXReturnValue parse_attrs(const Attrs& attrs, int* num_in, int* num_out) {
  Params p;
  if (!parse(attrs, &p)) return MX_FAIL;
  *num_in = 1;
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue infer_type(const Attrs&, std::vector<int>* in_types, std::vector<int>* out_types) {
  return float32_only("BoxNMSCPU", *in_types, out_types);
}

MXReturnValue infer_shape(const Attrs& attrs, std::vector<std::vector<unsigned int>>* in_shapes,
                          std::vector<std::vector<unsigned int>>* out_shapes) {
  Params p;
  if (!parse(attrs, &p)) return MX_FAIL;
  const auto& shape = in_shapes->at(0);
  if (shape.size() < 2) {
    MX_ERROR_MSG << "BoxNMSCPU: the input must have at least 2 dimensions (..., boxes, box width)";
    return MX_FAIL;
  }
  if (!check_width(p, shape.back())) return MX_FAIL;
  out_shapes->at(0) = shape;
  return MX_SUCCESS;
}

}  // namespace

REGISTER_OP(BoxNMSCPU)
    .setForward(forward, "cpu")
    .setBackward(backward, "cpu")
    .setParseAttrs(parse_attrs)
    .setInferType(infer_type)
    .setInferShape(infer_shape);

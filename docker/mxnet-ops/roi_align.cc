// ROIAlignCPU: MXNet's contrib.ROIAlign for float32 on CPU, with a backward pass that uses every OpenMP thread.
//
// MXNet 1.9's own CPU backward is one serial loop over (RoI, channel, bin) that scatters into the feature map's
// gradient: about 13% of a Faster R-CNN training iteration at short side 800 on 2 cores, with one core idle. Here the
// threads split the channels: each channel's gradient is a separate plane, so no two threads write the same element,
// and within a plane the contributions are added in MXNet's order (RoI, bin row, bin column, sample row, sample
// column; the four corners in order), with MXNet's arithmetic. The forward pass computes each output element with
// MXNet's arithmetic too. Outputs and gradients are therefore equal to MXNet's to the last bit
// (tests/programs/rcnn/test_cpu_ops.py checks it against mx.nd.contrib.ROIAlign).
//
// position_sensitive is not supported (the programs' networks do not use it): the Python side keeps MXNet's
// operator for it.

#include <omp.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "common.h"

using namespace mxnet_ops;

namespace {

struct Params {
  int pooled_h = 0, pooled_w = 0;
  float spatial_scale = 0.f;
  int sample_ratio = -1;
  bool aligned = false;
};

std::vector<long> integers_in(const std::string& text) {  // "(14, 14)" -> {14, 14}
  std::vector<long> values;
  const char* p = text.c_str();
  while (*p) {
    if (std::isdigit(static_cast<unsigned char>(*p)) || (*p == '-' && std::isdigit(static_cast<unsigned char>(p[1])))) {
      char* end;
      values.push_back(std::strtol(p, &end, 10));
      p = end;
    } else {
      ++p;
    }
  }
  return values;
}

bool parse(const Attrs& attrs, Params* params) {
  if (!attrs.count("pooled_size") || !attrs.count("spatial_scale")) {
    MX_ERROR_MSG << "ROIAlignCPU needs pooled_size and spatial_scale";
    return false;
  }
  std::vector<long> pooled = integers_in(attrs.at("pooled_size"));
  if (pooled.size() == 1) pooled.push_back(pooled[0]);
  if (pooled.size() != 2 || pooled[0] <= 0 || pooled[1] <= 0) {
    MX_ERROR_MSG << "ROIAlignCPU: pooled_size must be one or two positive integers, got " << attrs.at("pooled_size");
    return false;
  }
  params->pooled_h = static_cast<int>(pooled[0]);
  params->pooled_w = static_cast<int>(pooled[1]);
  params->spatial_scale = float_attr(attrs, "spatial_scale", 0.f);
  params->sample_ratio = int_attr(attrs, "sample_ratio", -1);
  params->aligned = bool_attr(attrs, "aligned", false);
  if (bool_attr(attrs, "position_sensitive", false)) {
    MX_ERROR_MSG << "ROIAlignCPU does not support position_sensitive: use mx.contrib.ROIAlign";
    return false;
  }
  return true;
}

// One bilinear sample point: the four neighbours' offsets in a channel plane and their weights.
struct Sample {
  int p1, p2, p3, p4;
  float w1, w2, w3, w4;
  bool inside;  // false: beyond the feature map by more than one cell; MXNet adds nothing for it
};

// One RoI's geometry, computed as MXNet computes it (the same float operations in the same order).
struct RoiGrid {
  int batch;  // < 0: MXNet skips the RoI
  int grid_h, grid_w;
  float count;
  std::vector<Sample> samples;  // (bin row, bin column, sample row, sample column)
};

RoiGrid roi_grid(const float* roi, int roi_cols, const Params& p, int height, int width) {
  RoiGrid grid;
  grid.batch = 0;
  if (roi_cols == 5) {
    grid.batch = static_cast<int>(roi[0]);
    ++roi;
  }
  if (grid.batch < 0) return grid;
  const float offset = p.aligned ? 0.5f : 0.f;
  const float start_w = roi[0] * p.spatial_scale - offset;
  const float start_h = roi[1] * p.spatial_scale - offset;
  const float end_w = roi[2] * p.spatial_scale - offset;
  const float end_h = roi[3] * p.spatial_scale - offset;
  float roi_w = end_w - start_w;
  float roi_h = end_h - start_h;
  if (!p.aligned) {
    roi_w = roi_w > 1.f ? roi_w : 1.f;
    roi_h = roi_h > 1.f ? roi_h : 1.f;
  }
  const float bin_h = roi_h / static_cast<float>(p.pooled_h);
  const float bin_w = roi_w / static_cast<float>(p.pooled_w);
  grid.grid_h = p.sample_ratio > 0 ? p.sample_ratio : static_cast<int>(std::ceil(roi_h / p.pooled_h));
  grid.grid_w = p.sample_ratio > 0 ? p.sample_ratio : static_cast<int>(std::ceil(roi_w / p.pooled_w));
  grid.count = static_cast<float>(grid.grid_h * grid.grid_w);
  grid.samples.reserve(static_cast<size_t>(p.pooled_h) * p.pooled_w * grid.grid_h * grid.grid_w);
  for (int ph = 0; ph < p.pooled_h; ph++) {
    for (int pw = 0; pw < p.pooled_w; pw++) {
      for (int iy = 0; iy < grid.grid_h; iy++) {
        const float yy = start_h + ph * bin_h + static_cast<float>(iy + .5f) * bin_h / static_cast<float>(grid.grid_h);
        for (int ix = 0; ix < grid.grid_w; ix++) {
          const float xx =
              start_w + pw * bin_w + static_cast<float>(ix + .5f) * bin_w / static_cast<float>(grid.grid_w);
          Sample s{0, 0, 0, 0, 0.f, 0.f, 0.f, 0.f, false};
          float y = yy, x = xx;
          if (!(y < -1.0 || y > height || x < -1.0 || x > width)) {
            if (y <= 0) y = 0;
            if (x <= 0) x = 0;
            int y_low = static_cast<int>(y), x_low = static_cast<int>(x), y_high, x_high;
            if (y_low >= height - 1) {
              y_high = y_low = height - 1;
              y = static_cast<float>(y_low);
            } else {
              y_high = y_low + 1;
            }
            if (x_low >= width - 1) {
              x_high = x_low = width - 1;
              x = static_cast<float>(x_low);
            } else {
              x_high = x_low + 1;
            }
            const float ly = y - y_low, lx = x - x_low;
            const float hy = 1. - ly, hx = 1. - lx;
            s = Sample{y_low * width + x_low, y_low * width + x_high, y_high * width + x_low, y_high * width + x_high,
                       hy * hx, hy * lx, ly * hx, ly * lx, true};
          }
          grid.samples.push_back(s);
        }
      }
    }
  }
  return grid;
}

std::vector<RoiGrid> roi_grids(const MXTensor& rois, const Params& p, int height, int width) {
  const int num_rois = static_cast<int>(rois.shape[0]), cols = static_cast<int>(rois.shape[1]);
  const float* data = floats(rois);
  std::vector<RoiGrid> grids(num_rois);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < num_rois; n++) grids[n] = roi_grid(data + static_cast<size_t>(n) * cols, cols, p, height, width);
  return grids;
}

// inputs: data (B, C, H, W), rois (N, 5); output (N, C, PH, PW).
MXReturnValue forward(const Attrs& attrs, std::vector<MXTensor>* inputs, std::vector<MXTensor>* outputs,
                      const OpResource&) {
  Params p;
  if (!parse(attrs, &p)) return MX_FAIL;
  const MXTensor& data = inputs->at(0);
  const int channels = static_cast<int>(data.shape[1]), height = static_cast<int>(data.shape[2]),
            width = static_cast<int>(data.shape[3]);
  const std::vector<RoiGrid> grids = roi_grids(inputs->at(1), p, height, width);
  const float* bottom = floats(data);
  float* top = outputs->at(0).data<float>();
  const int bins = p.pooled_h * p.pooled_w, num_rois = static_cast<int>(grids.size());
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < num_rois; n++) {
    for (int c = 0; c < channels; c++) {
      const RoiGrid& g = grids[n];
      float* out = top + (static_cast<size_t>(n) * channels + c) * bins;
      if (g.batch < 0) {
        for (int b = 0; b < bins; b++) out[b] = 0.f;
        continue;
      }
      const float* plane = bottom + (static_cast<size_t>(g.batch) * channels + c) * height * width;
      const int per_bin = g.grid_h * g.grid_w;
      for (int b = 0; b < bins; b++) {
        const Sample* s = &g.samples[static_cast<size_t>(b) * per_bin];
        float value = 0.;
        for (int k = 0; k < per_bin; k++, s++) {  // outside samples: MXNet adds 0 * plane[0]; so does this
          value += s->w1 * plane[s->p1] + s->w2 * plane[s->p2] + s->w3 * plane[s->p3] + s->w4 * plane[s->p4];
        }
        value /= g.count;
        out[b] = value;
      }
    }
  }
  return MX_SUCCESS;
}

// inputs: the output's gradient, data, rois, the forward output; outputs: the gradients of data and rois.
MXReturnValue backward(const Attrs& attrs, std::vector<MXTensor>* inputs, std::vector<MXTensor>* outputs,
                       const OpResource&) {
  Params p;
  if (!parse(attrs, &p)) return MX_FAIL;
  const MXTensor& grad_out = inputs->at(0);
  MXTensor& grad_data = outputs->at(0);
  const int batch = static_cast<int>(grad_data.shape[0]), channels = static_cast<int>(grad_data.shape[1]),
            height = static_cast<int>(grad_data.shape[2]), width = static_cast<int>(grad_data.shape[3]);
  const std::vector<RoiGrid> grids = roi_grids(inputs->at(2), p, height, width);
  const float* top = floats(grad_out);
  float* bottom = grad_data.data<float>();
  const int bins = p.pooled_h * p.pooled_w, num_rois = static_cast<int>(grids.size());
  const size_t plane_size = static_cast<size_t>(height) * width;
#pragma omp parallel for schedule(static)
  for (int bc = 0; bc < batch * channels; bc++) {
    float* plane = bottom + static_cast<size_t>(bc) * plane_size;
    for (size_t i = 0; i < plane_size; i++) plane[i] = 0.f;
    const int b = bc / channels, c = bc % channels;
    for (int n = 0; n < num_rois; n++) {  // MXNet's order within a plane
      const RoiGrid& g = grids[n];
      if (g.batch != b) continue;
      const float* diff = top + (static_cast<size_t>(n) * channels + c) * bins;
      const int per_bin = g.grid_h * g.grid_w;
      const Sample* s = g.samples.data();
      for (int bin = 0; bin < bins; bin++) {
        const float d = diff[bin];
        for (int k = 0; k < per_bin; k++, s++) {
          if (!s->inside) continue;
          plane[s->p1] += d * s->w1 / g.count;
          plane[s->p2] += d * s->w2 / g.count;
          plane[s->p3] += d * s->w3 / g.count;
          plane[s->p4] += d * s->w4 / g.count;
        }
      }
    }
  }
  MXTensor& grad_rois = outputs->at(1);
  if (grad_rois.data_ptr) {
    float* r = grad_rois.data<float>();
    for (int64_t i = 0, n = grad_rois.size(); i < n; i++) r[i] = 0.f;
  }
  return MX_SUCCESS;
}

MXReturnValue parse_attrs(const Attrs& attrs, int* num_in, int* num_out) {
  Params p;
  if (!parse(attrs, &p)) return MX_FAIL;
  *num_in = 2;
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue infer_type(const Attrs&, std::vector<int>* in_types, std::vector<int>* out_types) {
  return float32_only("ROIAlignCPU", *in_types, out_types);
}

MXReturnValue infer_shape(const Attrs& attrs, std::vector<std::vector<unsigned int>>* in_shapes,
                          std::vector<std::vector<unsigned int>>* out_shapes) {
  Params p;
  if (!parse(attrs, &p)) return MX_FAIL;
  const auto& data = in_shapes->at(0);
  const auto& rois = in_shapes->at(1);
  if (data.size() != 4 || rois.size() != 2 || rois[1] != 5) {
    MX_ERROR_MSG << "ROIAlignCPU: data must be (batch, channels, height, width) and rois (num_rois, 5)";
    return MX_FAIL;
  }
  out_shapes->at(0) = {rois[0], data[1], static_cast<unsigned int>(p.pooled_h), static_cast<unsigned int>(p.pooled_w)};
  return MX_SUCCESS;
}

}  // namespace

REGISTER_OP(ROIAlignCPU)
    .setForward(forward, "cpu")
    .setBackward(backward, "cpu")
    .setParseAttrs(parse_attrs)
    .setInferType(infer_type)
    .setInferShape(infer_shape);

"""What Mask R-CNN adds to Faster R-CNN: polygon annotations, the mask loss, mask mAP."""

import os

from mxnet_programs.process import ProgramError
from mxnet_programs.rcnn import coco_map
from mxnet_programs.rcnn.faster_rcnn import FasterRcnn

VAL_SCORE_THRESH = 0.001  # detections kept for COCO mask scoring


class MaskRcnn(FasterRcnn):
    prog = "mask_rcnn"
    family = "mask_rcnn"
    description = "Train GluonCV Mask R-CNN on COCO-format data with Horovod."
    loss_names = FasterRcnn.loss_names + ("mask",)
    main_metric = "val_segm_map"
    map_names = ("val_bbox_map", "val_segm_map")
    usable_objects = "non-crowd polygon, positive area and box"
    image_columns = ("label", "segm")
    class_rows = {**FasterRcnn.class_rows, "mask.mask": (0, 1)}  # the mask predictor: one mask per class

    def check_annotation(self, ann, annotation_file):
        if not ann.get("iscrowd", 0) and not isinstance(ann.get("segmentation"), list):
            raise ProgramError(
                f"annotation {ann.get('id')} (iscrowd=0) needs a polygon list 'segmentation' for Mask R-CNN in "
                f"{annotation_file}")

    def usable_box(self, ann, entry):
        """GluonCV COCOInstance's rule (crowd objects aside: usable()): exact box clipped to the image, area > 1,
        box area >= 4, a polygon of at least 3 points."""
        x, y, w, h = (float(v) for v in ann["bbox"])
        width, height = float(entry["width"]), float(entry["height"])
        area = float(ann.get("area", w * h))
        x1, y1 = min(width, max(0.0, x)), min(height, max(0.0, y))
        x2, y2 = min(width, max(0.0, x + max(0.0, w))), min(height, max(0.0, y + max(0.0, h)))
        polygons = [p for p in ann.get("segmentation", []) if isinstance(p, list) and len(p) >= 6]
        return area > 1 and x2 > x1 and y2 > y1 and (x2 - x1) * (y2 - y1) >= 4 and bool(polygons)

    def dataset_base(self, gdata):
        return gdata.COCOInstance

    def train_dataset_options(self):
        return {}  # COCOInstance never keeps crowd objects

    def read_image(self, dataset, coco, entry):
        label, segm = dataset._check_load_bbox(coco, entry)
        if dataset._skip_empty and label is None:
            return None
        return label, segm

    def transforms(self, net, short, val_short, max_size, use_fpn, num_devices):
        from gluoncv.data import batchify
        from gluoncv.data.transforms.presets import rcnn as presets

        return (presets.MaskRCNNDefaultTrainTransform(short, max_size, net, ashape=net.ashape, multi_stage=use_fpn),
                batchify.MaskRCNNTrainBatchify(net, num_devices),
                *self.val_transforms(val_short, max_size))

    def val_transforms(self, val_short, max_size):
        """A sample is (image, [input height, input width, input / original scale])."""
        from gluoncv.data import batchify
        from gluoncv.data.transforms.presets import rcnn as presets

        return (presets.MaskRCNNDefaultValTransform(val_short, max_size),
                batchify.Tuple(*[batchify.Append() for _ in range(2)]))

    def split_sample(self, sample):
        data, label, gt_mask, *rpn_targets = sample
        return data, label, tuple(rpn_targets), gt_mask

    def split_outputs(self, out):
        (cls_pred, box_pred, mask_pred, roi, _samples, matches, rpn_score, rpn_box, _anchors,
         cls_targets, box_targets, box_masks, indices) = out
        return (cls_pred, box_pred, rpn_score, rpn_box, cls_targets, box_targets, box_masks), \
            (mask_pred, roi, matches, indices)

    def extra_losses(self, step, net, outputs, gt_mask, cls_targets):
        """The mask loss on the sampled positive RoIs (GluonCV's mask targets), each image's normalised by its own
        positive RoIs, as a device with one image does: GluonCV's one normaliser for a device's images weighs them by
        their positive RoIs, so the same images trained as 1 rank x 2 and 2 ranks x 1 gave other weights."""
        nd = step.mx.nd
        mask_pred, roi, matches, indices = outputs
        n = indices.shape[0]

        def take(array, shape):
            return nd.concat(*[nd.take(array[i], indices[i]) for i in range(n)], dim=0).reshape(shape)

        mask_targets, mask_masks = net.mask_target(take(roi, (n, -1, 4)), gt_mask, take(matches, (n, -1)),
                                                   take(cls_targets, (n, -1)))
        weights = nd.maximum(mask_masks.reshape((n, -1)).sum(axis=1), 1)  # an image's positive RoIs x mask pixels
        mask_loss = step.mask_loss(mask_pred, mask_targets, mask_masks) * (mask_targets.size / n) / weights
        return [mask_loss.sum()]

    def val_collector(self, val_ds, output_data_dir, start):
        return _MaskResults(self, val_ds, output_data_dir, start)

    def score(self, val_ds, gathered, prefix, log_summary):
        """Rank 0: bbox and segm mAP of all ranks' results (in COCO's results format, written by GluonCV's metric on
        each rank: _MaskResults), scored by pycocotools (coco_map)."""
        results = [r for part in gathered for r in part]
        coco_map.write_results(f"{prefix}.json", results)
        scores, per_category = {}, {}
        for iou_type in ("bbox", "segm"):
            scores[f"val_{iou_type}_map"], summary, per_category[iou_type] = coco_map.average_precision(
                val_ds.coco, results, iou_type)
            log_summary([f"~~~~ Summary {iou_type} metrics ~~~~"], [summary])
        return scores, per_category


class _MaskResults:
    """One rank's detections and full-image masks of its contiguous validation shard, in GluonCV's COCO
    result format (image ids from `start`), for rank 0 to merge.

    Masks are pasted at the size the annotation file gives the image, which pycocotools compares them at. Not at
    the input's size divided by the scale, as GluonCV's script does: one scale for both sides can miss the width by
    a pixel (547 px wide, 466 high, short side 256: 546), and a mask of another size matches nothing."""

    def __init__(self, model, val_ds, output_data_dir, start):
        import numpy as np
        from gluoncv.data.transforms.mask import fill
        from gluoncv.nn.bbox import BBoxClipToImage
        from gluoncv.utils.metrics.coco_instance import COCOInstanceMetric

        self.np, self.fill, self.clipper = np, fill, BBoxClipToImage()
        self.metric = COCOInstanceMetric(val_ds, os.path.join(output_data_dir, f"{model.prog}_val"),
                                         use_time=False, cleanup=True, starting_id=start)
        self.metric.reset()
        # The images in the metric's order (sorted ids; the validation dataset keeps every image)
        entries = val_ds.coco.loadImgs(sorted(val_ds.coco.getImgIds()))
        self.sizes = [(int(entry["width"]), int(entry["height"])) for entry in entries]
        self.index = start

    def add(self, net, x, sample):
        np = self.np
        ids, scores, bboxes, masks = net(x)
        bboxes = self.clipper(bboxes, x)  # to the input, as GluonCV's script: the box scored, the mask pasted in it
        im_scale = float(sample[1][0].asnumpy()[2])  # input / original
        ids, scores = ids[0].asnumpy(), scores[0].asnumpy()
        bboxes, masks = bboxes[0].asnumpy(), masks[0].asnumpy()
        valid = np.where((ids.ravel() >= 0) & (scores.ravel() >= VAL_SCORE_THRESH))[0]
        bboxes = bboxes[valid] / im_scale
        size = self.sizes[self.index]
        self.index += 1
        self.metric.update(bboxes, ids[valid], scores[valid], self.fill(masks[valid], bboxes, size))

    def results(self):
        return self.metric.get_result_buffer()


MODEL = MaskRcnn()

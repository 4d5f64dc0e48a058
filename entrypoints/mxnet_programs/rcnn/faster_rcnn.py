"""What is particular to Faster R-CNN (boxes only); mask_rcnn.MaskRcnn extends it with masks.

The generic modules ask the model object for: its GluonCV name and metric lines; which annotations count
(the rules of GluonCV's COCODetection); its dataset, transforms and batchify functions; how a training
sample and the network's training outputs are laid out, and any loss beyond the four R-CNN losses; how a
validation image is scored. Standard library only at import time: GluonCV modules come as arguments or
are imported inside the methods that run after the input was checked.
"""

import re

from mxnet_programs.metrics import quoted
from mxnet_programs.rcnn import coco_map

NUMBER = r"([-+]?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
VAL_SCORE_THRESH = 0.05  # COCODetectionMetric's default: lower scores are dropped anyway


class FasterRcnn:
    prog = "faster_rcnn"
    family = "faster_rcnn"
    description = "Train GluonCV Faster R-CNN on COCO-format data with Horovod."
    loss_names = ("rpn_cls", "rpn_box", "rcnn_cls", "rcnn_box")
    main_metric = "val_bbox_map"
    map_names = ("val_bbox_map",)
    usable_objects = "non-crowd, positive area and box"
    image_columns = ("label",)  # what GluonCV's dataset keeps per image besides its path and aspect ratio
    # The class-specific parameters (weight and bias) by name prefix: (leading rows, rows per class). The class
    # predictor leads with the background's row; the box predictor has 4 rows (offsets) per class. Fine-tuning
    # (finetune.py) reuses them class by class.
    class_rows = {"class_predictor": (1, 1), "box_predictor": (0, 4)}

    def model_name(self, network, use_fpn):
        return "_".join([self.family, *(["fpn"] if use_fpn else []), network, "coco"])

    def metric_definitions(self):
        """SageMaker metric_definitions for the lines the program prints (one captured number each).

        Iteration lines:  epoch=0 iter=5 loss=1.2 rpn_cls=.. rpn_box=.. rcnn_cls=.. rcnn_box=.. [mask=..]
                          lr=0.00125 samples_per_sec=0.123
        Epoch lines:      epoch=0 train_loss=1.2 samples_per_sec=0.123 epoch_sec=12.34
        Validation lines: epoch=0 val_bbox_map=0.0123 [val_segm_map=0.0101] val_images=4 val_sec=5.67
        """
        it = r"epoch=\d+ iter=\d+ loss="
        defs = [{"Name": "train:loss", "Regex": it + NUMBER}]
        prefix = it + r"\S+"
        for name in self.loss_names:
            defs.append({"Name": f"train:{name}", "Regex": prefix + f" {name}=" + NUMBER})
            prefix += rf" {name}=\S+"
        defs += [
            {"Name": "train:lr", "Regex": prefix + " lr=" + NUMBER},
            {"Name": "train:samples_per_sec", "Regex": prefix + r" lr=\S+ samples_per_sec=" + NUMBER},
            {"Name": "train:epoch_loss", "Regex": r"epoch=\d+ train_loss=" + NUMBER},
        ]
        prefix = r"epoch=\d+"
        for name in self.map_names:
            defs.append({"Name": f"validation:{name[4:]}", "Regex": prefix + f" {name}=" + NUMBER})
            prefix += rf" {name}=\S+"
        return defs

    def class_metric_definitions(self, class_names):
        """SageMaker metric_definitions for each class's AP (validation:bbox_ap:<name>, [validation:segm_ap:<name>]),
        from the validation's class lines: epoch=0 class="bolt" val_bbox_ap=0.0456 [val_segm_ap=0.0321] val_objects=12.
        SageMaker takes 40 metric definitions at most: pick the classes to watch (all are in metrics.json)."""
        defs = []
        for name in class_names:
            prefix = r"epoch=\d+ class=" + re.escape(quoted(name))
            for ap in self.map_names:
                ap = ap.replace("_map", "_ap")
                defs.append({"Name": f"validation:{ap[4:]}:{name}", "Regex": prefix + f" {ap}=" + NUMBER})
                prefix += rf" {ap}=\S+"
        return defs

    # ---- input rules (standard library)

    def check_annotation(self, ann, annotation_file):
        """Raises ProgramError for an annotation this model cannot train on (none for boxes)."""

    def usable(self, ann, entry):
        """Whether the object trains the network: never a crowd object (the rule of GluonCV's COCOInstance and of
        train_faster_rcnn.py's COCODetection(use_crowd=False)), else the model's box rule."""
        return not ann.get("iscrowd", 0) and self.usable_box(ann, entry)

    def usable_box(self, ann, entry):
        """GluonCV COCODetection's rule for keeping an object: legacy inclusive corners (x2 = x + w - 1)
        clipped to [0, size - 1], positive area and box."""
        x, y, w, h = (float(v) for v in ann["bbox"])
        width, height = float(entry["width"]), float(entry["height"])
        area = float(ann.get("area", w * h))
        x1, y1 = min(width - 1, max(0.0, x)), min(height - 1, max(0.0, y))
        x2 = min(width - 1, max(0.0, x + max(w - 1, 0.0)))
        y2 = min(height - 1, max(0.0, y + max(h - 1, 0.0)))
        return area > 0 and x2 > x1 and y2 > y1

    # ---- GluonCV data

    def dataset_base(self, gdata):
        return gdata.COCODetection

    def train_dataset_options(self):
        """GluonCV's dataset options for the train set beyond skip_empty: COCODetection keeps crowd objects unless
        told (train_faster_rcnn.py builds it with use_crowd=False)."""
        return {"use_crowd": False}

    def read_image(self, dataset, coco, entry):
        """The image's `image_columns` as GluonCV's dataset reads them, or None to skip the image."""
        label = dataset._check_load_bbox(coco, entry)
        return (label,) if label else None

    def transforms(self, net, short, val_short, max_size, use_fpn, num_devices):
        """(train transform, train batchify, val transform, val batchify)."""
        from gluoncv.data import batchify
        from gluoncv.data.transforms.presets import rcnn as presets

        return (presets.FasterRCNNDefaultTrainTransform(short, max_size, net, ashape=net.ashape,
                                                        multi_stage=use_fpn),
                batchify.FasterRCNNTrainBatchify(net, num_devices),
                *self.val_transforms(val_short, max_size))

    def val_transforms(self, val_short, max_size):
        """(val transform, val batchify): no network needed. A sample is (image, boxes, original / input scale)."""
        from gluoncv.data import batchify
        from gluoncv.data.transforms.presets import rcnn as presets

        return (presets.FasterRCNNDefaultValTransform(val_short, max_size),
                batchify.Tuple(*[batchify.Append() for _ in range(3)]))

    # ---- training

    def split_sample(self, sample):
        """(data, label, (rpn_cls_targets, rpn_box_targets, rpn_box_masks), model-specific part)."""
        data, label, *rpn_targets = sample
        return data, label, tuple(rpn_targets), None

    def split_outputs(self, out):
        """The training outputs: (cls_pred, box_pred, rpn_score, rpn_box, cls_targets, box_targets,
        box_masks) and the model-specific part."""
        (cls_pred, box_pred, _roi, _samples, _matches, rpn_score, rpn_box, _anchors,
         cls_targets, box_targets, box_masks, _indices) = out
        return (cls_pred, box_pred, rpn_score, rpn_box, cls_targets, box_targets, box_masks), None

    def extra_losses(self, step, net, outputs, sample_part, cls_targets):
        """Losses beyond the four R-CNN ones, each summed (none for boxes)."""
        return []

    # ---- validation

    def val_collector(self, val_ds, output_data_dir, start):
        return _BoxResults(start)

    def score(self, val_ds, gathered, prefix, log_summary):
        """Rank 0: ({main metric name: COCO mAP}, {IoU type: {category id: AP}}) from all ranks' results; GluonCV's metric writes them in COCO's results format (its box
        convention: w = x2 - x1 + 1), pycocotools scores them (coco_map)."""
        import numpy as np
        from gluoncv.utils.metrics.coco_detection import COCODetectionMetric

        metric = COCODetectionMetric(val_ds, prefix, use_time=False, cleanup=False, score_thresh=VAL_SCORE_THRESH)
        metric.reset()
        records = sorted((r for part in gathered for r in part), key=lambda r: r[0])
        if [r[0] for r in records] != list(range(len(val_ds))):
            raise RuntimeError(f"validation gathered {len(records)} image results for {len(val_ds)} images")
        for _, bboxes, ids, scores in records:
            metric.update(bboxes[np.newaxis], ids[np.newaxis], scores[np.newaxis])
        results = metric._results  # GluonCV 0.10.4's list of COCO result dicts (no public accessor)
        coco_map.write_results(f"{prefix}.json", results)
        bbox_map, summary, per_category = coco_map.average_precision(val_ds.coco, results, "bbox")
        log_summary(["~~~~ Summary bbox metrics ~~~~"], [summary])
        return {"val_bbox_map": bbox_map}, {"bbox": per_category}


class _BoxResults:
    """One rank's detections of its contiguous validation shard, by image index."""

    def __init__(self, start):
        from gluoncv.nn.bbox import BBoxClipToImage

        self.start, self.records, self.clipper = start, [], BBoxClipToImage()

    def add(self, net, x, sample):
        ids, scores, bboxes = net(x)
        bboxes = self.clipper(bboxes, x)
        scale = float(sample[2].reshape((-1,)).asscalar())
        ids, scores = ids[0].asnumpy().ravel(), scores[0].asnumpy().ravel()
        bboxes = bboxes[0].asnumpy() * scale
        keep = (ids >= 0) & (scores >= VAL_SCORE_THRESH)
        self.records.append((self.start + len(self.records), bboxes[keep], ids[keep], scores[keep]))

    def results(self):
        return self.records


MODEL = FasterRcnn()

"""The R-CNN programs' validation (evaluation.validate) on known detections: `known_detections.py PLANS.json OUT.json
PROGRAM_ARGS...`, one process, or one per rank under mpirun.

What runs is the programs' own: config (cli.py), channels (inputs.py), GluonCV datasets (data.py), the model's
validation transform and batchify, validate()'s shard, DataLoader, collector (_BoxResults / _MaskResults, which
rescale to the original image), Horovod gather and score (GluonCV's metrics, pycocotools). Only the network is
replaced, by KnownDetections: it answers each image with detections the test chose, in the network input's
coordinates. That is the input of the code under test, not part of it.

A Mask R-CNN detection's mask is its training target: what GluonCV's MaskTargetGenerator makes of the polygon for
the detection's box (the polygon rasterized by pycocotools at the input's size, then ROIAlign to 28 x 28 with
sample_ratio 2, the legacy half-pixel convention included). A network predicting its targets predicts that; drawn
any other way (e.g. the polygon's exact share of each cell), GluonCV's pasting (mask.fill, inclusive pixel corners)
makes it about a pixel wider and higher than the object.

PLANS.json: {"faster": [plan, ...], "mask": [plan, ...]} (either may be missing); a plan is a list of the
validation images (their order does not matter) as {"width", "height", "detections": [{"class": contiguous id,
"score", "box": [x1, y1, x2, y2], "polygon": [x, y, ...]}]} in ORIGINAL image coordinates, boxes in the model's
convention (the test's to choose). Mask R-CNN's mask of a detection is its polygon drawn in its box, as the
network's 28 x 28 box-relative mask (below). Each plan is validated once (as epoch 0, 1, ...).

OUT.json (rank 0): {"faster": [validate()'s result per plan], "mask": [...], "served": {model: [[(plan, image)
indexes each rank's network answered], ...]}}.
"""

import dataclasses
import json
import math
import sys

import numpy as np

MASK_SIDE = 28  # GluonCV's Mask R-CNN predicts 28 x 28 masks (14 x 14 RoIs, upsampled twice)
ROWS = 20  # detections per image, padded with class -1 like GluonCV's networks
ASPECT_TOLERANCE = 0.01


def mask_target(mx, polygon, box, input_size):
    """GluonCV's mask target of the polygon for the box, both in the input's coordinates: MASK_SIDE x MASK_SIDE."""
    from pycocotools import mask as mask_utils

    width, height = input_size
    pixels = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects([list(polygon)], height, width)))
    rois = mx.nd.array([[0, *box]])
    pooled = mx.nd.contrib.ROIAlign(mx.nd.array(pixels[np.newaxis, np.newaxis]), rois, (MASK_SIDE, MASK_SIDE), 1.0,
                                    sample_ratio=2)
    return pooled[0, 0].asnumpy()


class KnownDetections:
    """Stands in for the network at inference. It knows an image by its aspect ratio (the test's images differ
    in it), so it relies on nothing of validate()'s order or sharding; the input's height over the original's
    is the factor the transform resized by."""

    def __init__(self, mx, plan, with_masks):
        self.mx, self.plan, self.with_masks = mx, plan, with_masks
        self.served = []

    def hybridize(self, **_):
        pass

    def which(self, height, width):
        errors = [abs(math.log(width / height) - math.log(image["width"] / image["height"])) for image in self.plan]
        index = int(np.argmin(errors))
        if errors[index] > ASPECT_TOLERANCE:
            raise RuntimeError(f"no planned image has the aspect ratio of a {width} x {height} input")
        return index

    def __call__(self, x):
        nd = self.mx.nd
        height, width = x.shape[2:]
        index = self.which(height, width)
        self.served.append(index)
        image = self.plan[index]
        scale = height / image["height"]
        ids = np.full((1, ROWS, 1), -1, np.float32)
        scores = np.full((1, ROWS, 1), -1, np.float32)
        boxes = np.full((1, ROWS, 4), -1, np.float32)
        masks = np.zeros((1, ROWS, MASK_SIDE, MASK_SIDE), np.float32)
        for row, det in enumerate(image["detections"]):
            ids[0, row, 0], scores[0, row, 0] = det["class"], det["score"]
            boxes[0, row] = np.asarray(det["box"], np.float64) * scale
            if self.with_masks:
                polygon = [v * scale for v in det["polygon"]]
                masks[0, row] = mask_target(self.mx, polygon, boxes[0, row], (width, height))
        outputs = [nd.array(ids), nd.array(scores), nd.array(boxes)]
        return (*outputs, nd.array(masks)) if self.with_masks else tuple(outputs)


def main(plans_path, out_path, argv):
    import gluoncv
    from mxnet_programs import sagemaker_env as sm
    from mxnet_programs.rcnn import cli, data, evaluation, inputs
    from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER
    from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK
    from mxnet_programs.session import Session

    with open(plans_path) as f:
        plans = json.load(f)
    session = Session("known_detections", sm.dist_env(), stop=None)
    out = {"served": {}}
    for name, model in (("faster", FASTER), ("mask", MASK)):
        if name not in plans:
            continue
        config = dataclasses.replace(cli.parse_config(model, argv), num_workers=0)
        train, val = inputs.load_inputs(model, config)
        _, val_ds = data.make_datasets(model, train, val, gluoncv.data)
        val_tf, val_batchify = model.val_transforms(config.short, config.max_size)
        out[name], served = [], []
        for epoch, plan in enumerate(plans[name]):
            net = KnownDetections(session.mx, plan, with_masks=name == "mask")
            out[name].append(evaluation.validate(session, model, net, val_ds, val_tf, val_batchify,
                                                 [session.mx.cpu()], config, epoch))
            served += [(epoch, index) for index in net.served]
        out["served"][name] = session.allgather_object(served, f"known.served.{name}")
    if session.rank == 0:
        with open(out_path, "w") as f:
            json.dump(out, f)
    session.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])

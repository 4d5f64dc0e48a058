"""Serve a detector trained by the built-in faster_rcnn or mask_rcnn program: the inference script for AWS's MXNet
inference containers (sagemaker-mxnet-inference-toolkit: it calls model_fn once, then transform_fn per request), and a
command line for one image.

The training job's model.tar.gz holds the exported network (model-symbol.json, model-0000.params: the best epoch's),
classes.json (class i's category id and name) and model.json (the image size it trained at). MXNet alone loads and
runs it (mx.gluon.SymbolBlock), whatever GluonCV the serving container has; the image is prepared as GluonCV's R-CNN
validation transform does (short side to `short`, long side at most `max_size`, bilinear; ImageNet mean and std).

SageMaker (SDK v2): MXNetModel(model_data=estimator.model_data, entry_point="rcnn_inference.py", role=...,
framework_version="1.9.0", py_version="py38").deploy(1, "ml.c5.xlarge"); predictor.predict(jpeg_bytes) with
content type application/x-image returns JSON: [{"class", "category_id", "score", "box": [x1, y1, x2, y2]}] in the
image's pixels, best first (Mask R-CNN adds "mask": the network's mask probabilities over the box, 14 x 14 for the
C4 models, 28 x 28 with FPN; gluoncv.data.transforms.mask.fill pastes them into the image).

Command line: python rcnn_inference.py MODEL_DIR IMAGE.jpg [--threshold 0.5]
"""

import argparse
import json
import os
import sys
import warnings

import mxnet as mx

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # what the programs' transforms normalise with
BILINEAR = 1  # as the validation transform resizes


class Detector:
    def __init__(self, net, classes, short, max_size, ctx):
        self.net, self.classes, self.short, self.max_size, self.ctx = net, classes, short, max_size, ctx


def model_fn(model_dir):
    """The exported network and what it needs: its classes, its input size, the device."""
    ctx = mx.gpu() if mx.context.num_gpus() else mx.cpu()
    with warnings.catch_warnings():  # "Cannot decide type for ... data": the input's, known when an image comes
        warnings.simplefilter("ignore")
        net = mx.gluon.SymbolBlock.imports(os.path.join(model_dir, "model-symbol.json"), ["data"],
                                           os.path.join(model_dir, "model-0000.params"), ctx=ctx)
    with open(os.path.join(model_dir, "classes.json")) as f:
        classes = json.load(f)
    with open(os.path.join(model_dir, "model.json")) as f:
        info = json.load(f)
    short = info["short"][-1] if isinstance(info["short"], list) else info["short"]  # a range trains; its top validates
    return Detector(net, classes, short, info["max_size"], ctx)


def prepare(detector, image):
    """(the network's input, input / original scale) of an HWC uint8 image."""
    height, width = image.shape[:2]
    scale = detector.short / min(height, width)
    if round(scale * max(height, width)) > detector.max_size:
        scale = detector.max_size / max(height, width)
    resized = mx.image.imresize(image, int(round(width * scale)), int(round(height * scale)), interp=BILINEAR)
    x = mx.nd.image.normalize(mx.nd.image.to_tensor(resized), mean=MEAN, std=STD)
    return x.expand_dims(0).as_in_context(detector.ctx), resized.shape[0] / height


def detect(detector, image, threshold=0.0):
    """Detections of an HWC uint8 image, best first, boxes in its pixels."""
    x, scale = prepare(detector, image)
    ids, scores, boxes, *masks = (output[0].asnumpy() for output in detector.net(x))
    found = []
    for k in range(len(ids)):
        if ids[k, 0] < 0 or scores[k, 0] < threshold:
            continue
        entry = detector.classes[int(ids[k, 0])]
        found.append({"class": entry["name"], "category_id": entry["id"], "score": float(scores[k, 0]),
                      "box": [float(v) / scale for v in boxes[k]]})
        if masks:
            found[-1]["mask"] = masks[0][k].tolist()
    return sorted(found, key=lambda d: -d["score"])


def transform_fn(detector, request_body, content_type, accept):
    """The inference toolkit's per-request hook: a JPEG or PNG (application/x-image) in, JSON detections out."""
    if content_type not in ("application/x-image", "image/jpeg", "image/png"):
        raise ValueError(f"send an image (application/x-image), not {content_type}")
    return json.dumps(detect(detector, mx.image.imdecode(request_body))), "application/json"


def main(argv=None):
    parser = argparse.ArgumentParser(description="Detect objects in one image with an exported R-CNN detector.")
    parser.add_argument("model_dir")
    parser.add_argument("image")
    parser.add_argument("--threshold", type=float, default=0.5, help="lowest score shown")
    args = parser.parse_args(argv)
    detector = model_fn(args.model_dir)
    with open(args.image, "rb") as f:
        image = mx.image.imdecode(f.read())
    for found in detect(detector, image, args.threshold):
        print(f"{found['score']:.3f} {found['class']} (id {found['category_id']}) "
              f"box {' '.join(f'{v:.1f}' for v in found['box'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Shared code of the GluonCV R-CNN entrypoints (faster_rcnn.py, mask_rcnn.py).

The entrypoints are thin: they name the model kind and their METRIC_DEFINITIONS and call `main`.
Everything else lives here: hyperparameters, input validation, the pretrained-backbone lookup,
Horovod / kvstore setup, the training loop, distributed COCO validation, checkpoints and outputs.
The module docstring of each entrypoint documents the user-facing contract (data layout, CLI,
outputs, exit codes); this one only adds implementation notes.

Import cost: nothing heavy at import time (stdlib + sm_common). numpy, mxnet, gluoncv and horovod
are imported in `Job.setup`, after the input has been validated with the standard library, so a bad
channel fails in well under a second, before MPI is initialised.

Conventions:
  * Epochs are numbered from 0 in log lines (``epoch=0 iter=1 ...``), like GluonCV's own scripts;
    ``--lr-decay-epoch 17,23`` means the decay applies from epoch index 17 on. ``iter`` counts the
    iterations done in the current epoch (1-based).
  * Learning rate: ``--lr`` is the rate for a global batch of 8 images (GluonCV's 0.00125 per
    image); the optimizer uses ``lr x global_batch / 8`` with global_batch = batch_size x devices
    x ranks, warmed up linearly from ``lr_warmup_factor`` over ``--lr-warmup`` iterations.
  * All ranks run the same number of iterations per epoch (else a gradient allreduce would wait
    forever): each epoch the train images are permuted with a seed shared by all ranks and rank r
    takes every size-th image from position r; iterations = images per rank // per-rank batch. A
    ShardedByS3Key channel uses local rank and ranks per host instead (channel_sharding), and the
    smallest host part sets the iterations.
"""

import argparse
import contextlib
import io
import json
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
import warnings
import zipfile

import channel_sharding
import sm_common as smc

LR_REFERENCE_BATCH = 8  # --lr is the learning rate for this many images per iteration (global)
DEFAULT_TRAIN_SPLIT_PREFIX = "train"
DEFAULT_VAL_SPLIT_PREFIX = "val"
# AWS's R-CNN Horovod walkthrough passes one channel, `data`, holding COCO 2017 as COCO ships it.
DATA_CHANNEL = "data"
DATA_TRAIN_SPLIT, DATA_VAL_SPLIT = "train2017", "val2017"
DOWNLOAD_TIMEOUT_SECONDS = 10  # per socket operation
DOWNLOAD_DEADLINE_SECONDS = 600  # whole download of a backbone (~100 MB)
FASTER_VAL_SCORE_THRESH = 0.05  # COCODetectionMetric's default: lower scores are dropped anyway

COCO_CLASSES = [
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
    "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
    "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
    "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
    "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard",
    "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors",
    "teddy bear", "hair drier", "toothbrush",
]


class ModelKind:
    """What differs between Faster R-CNN and Mask R-CNN."""

    def __init__(self, prog, family, masks):
        self.prog, self.family, self.masks = prog, family, masks

    def model_name(self, network, use_fpn):
        return "_".join([self.family, *(["fpn"] if use_fpn else []), network, "coco"])

    @property
    def loss_names(self):
        return ["rpn_cls", "rpn_box", "rcnn_cls", "rcnn_box"] + (["mask"] if self.masks else [])

    @property
    def main_metric(self):
        return "val_segm_map" if self.masks else "val_bbox_map"


FASTER_RCNN = ModelKind("faster_rcnn", "faster_rcnn", masks=False)
MASK_RCNN = ModelKind("mask_rcnn", "mask_rcnn", masks=True)

# --------------------------------------------------------------------------------------------
# Metric lines and their regexes

NUMBER = r"([-+]?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"


def metric_definitions(kind):
    """SageMaker metric_definitions for the lines this module prints (one captured number each).

    Iteration lines:  epoch=0 iter=5 loss=1.2 rpn_cls=.. rpn_box=.. rcnn_cls=.. rcnn_box=.. [mask=..]
                      lr=0.00125 samples_per_sec=0.123
    Epoch lines:      epoch=0 train_loss=1.2 samples_per_sec=0.123 epoch_sec=12.34
    Validation lines: epoch=0 val_bbox_map=0.0123 [val_segm_map=0.0101] val_images=4 val_sec=5.67
    """
    it = r"epoch=\d+ iter=\d+ loss="
    defs = [{"Name": "train:loss", "Regex": it + NUMBER}]
    prefix = it + r"\S+"
    for name in kind.loss_names:
        defs.append({"Name": f"train:{name}", "Regex": prefix + f" {name}=" + NUMBER})
        prefix += rf" {name}=\S+"
    defs += [
        {"Name": "train:lr", "Regex": prefix + " lr=" + NUMBER},
        {"Name": "train:samples_per_sec", "Regex": prefix + r" lr=\S+ samples_per_sec=" + NUMBER},
        {"Name": "train:epoch_loss", "Regex": r"epoch=\d+ train_loss=" + NUMBER},
        {"Name": "validation:bbox_map", "Regex": r"epoch=\d+ val_bbox_map=" + NUMBER},
    ]
    if kind.masks:
        defs.append({"Name": "validation:segm_map", "Regex": r"epoch=\d+ val_bbox_map=\S+ val_segm_map=" + NUMBER})
    return defs


# --------------------------------------------------------------------------------------------
# Hyperparameters


def _non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer value: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_float(text):
    value = smc.non_negative_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def _list_text(text):
    """'17,23', or '[17, 23]': the sagemaker-training toolkit passes a JSON list hyperparameter that way."""
    return str(text).strip().removeprefix("[").removesuffix("]")


def _short_side(text):
    """N, or MIN,MAX for a random short side per training image (validation uses MAX)."""
    try:
        parts = [int(p) for p in _list_text(text).split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid short side {text!r}: use N or MIN,MAX") from None
    if len(parts) not in (1, 2) or min(parts) < 32 or (len(parts) == 2 and parts[0] > parts[1]):
        raise argparse.ArgumentTypeError(f"invalid short side {text!r}: use N or MIN,MAX (each >= 32)")
    return parts[0] if len(parts) == 1 else tuple(parts)


def _epoch_list(text):
    try:
        values = sorted(int(p) for p in _list_text(text).split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid epoch list {text!r}: use comma-separated integers") from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"invalid epoch list {text!r}: epochs must be >= 0")
    return values


def build_parser(kind, description):
    parser = smc.HyperparameterParser(prog=kind.prog, description=description,
                                      formatter_class=smc.DefaultsHelpFormatter)
    p = parser.add_argument
    g = parser.add_argument_group("training")
    g.add_argument("--epochs", type=smc.positive_int, default=26, help="number of epochs")
    g.add_argument("--batch-size", type=smc.positive_int, default=1,
                   help="images per device (GPU, or the CPU of a rank) per iteration")
    g.add_argument("--lr", type=_positive_float, default=0.01,
                   help=f"learning rate for a global batch of {LR_REFERENCE_BATCH} images; the optimizer uses "
                        f"lr x global_batch / {LR_REFERENCE_BATCH} (global_batch = batch size x devices x ranks)")
    g.add_argument("--lr-warmup", type=_non_negative_int, default=1000,
                   help="linear warmup length in iterations (0: none)")
    g.add_argument("--lr-warmup-factor", type=smc.non_negative_float, default=1.0 / 3.0,
                   help="the warmup starts at lr x this factor")
    g.add_argument("--lr-decay-epoch", type=_epoch_list, default="17,23",
                   help="comma list of epoch indexes (from 0) at which the lr is multiplied by --lr-decay")
    g.add_argument("--lr-decay", type=smc.non_negative_float, default=0.1, help="lr decay factor")
    g.add_argument("--wd", type=smc.non_negative_float, default=1e-4, help="weight decay (not on biases)")
    g.add_argument("--momentum", type=smc.non_negative_float, default=0.9, help="SGD momentum")
    g.add_argument("--seed", type=int, default=233, help="random seed (same on all ranks)")
    g.add_argument("--amp", type=smc.str2bool, default=False,
                   help="mixed precision with mxnet.contrib.amp (GPU only)")
    g.add_argument("--max-iterations-per-epoch", type=_non_negative_int, default=0,
                   help="cap on iterations per epoch, for smoke tests and benchmarks (0: the whole shard)")
    g.add_argument("--num-workers", type=_non_negative_int, default=4,
                   help="DataLoader worker processes per rank (0: load in the training process)")
    g.add_argument("--hybridize", type=smc.str2bool, default=True, help="hybridize the network")

    g = parser.add_argument_group("model")
    g.add_argument("--network", default="resnet50_v1b",
                   help=f"backbone; the GluonCV model is {kind.family}[_fpn]_<network>_coco")
    g.add_argument("--use-fpn", type=smc.str2bool, default=False, help="feature pyramid network variant")
    g.add_argument("--short", type=_short_side, default=800,
                   help="image short side in pixels, or MIN,MAX for a random short side in training")
    g.add_argument("--max-size", type=smc.positive_int, default=1333, help="cap on the image long side")
    g.add_argument("--pretrained-base", type=smc.str2bool, default=True,
                   help="start from ImageNet backbone weights <network>-<hash>.params in $MXNET_HOME/models")
    g.add_argument("--download-pretrained", type=smc.str2bool, default=True,
                   help="if the backbone weights are missing, try GluonCV's model store (bounded by timeouts; "
                        "fails fast without network)")
    g.add_argument("--rpn-test-post-nms", type=smc.positive_int, default=1000,
                   help="proposals kept per image in validation (GluonCV's default 1000; lower is much faster on "
                        "CPU)")

    g = parser.add_argument_group("distribution")
    g.add_argument("--horovod", type=smc.str2bool, default=True,
                   help="one process per device under MPI with Horovod; false: one process over all devices of "
                        "a single host with MXNet's kvstore")
    g.add_argument("--kv-store", default="device", choices=["device", "local"],
                   help="kvstore for --horovod false")

    g = parser.add_argument_group("validation, checkpoints and logs")
    g.add_argument("--val-interval", type=smc.positive_int, default=1,
                   help="validate every N epochs (and after the last one)")
    g.add_argument("--save-interval", type=_non_negative_int, default=1,
                   help="checkpoint every N epochs (and after the last one; 0: only after the last one)")
    g.add_argument("--log-interval", type=_non_negative_int, default=100,
                   help="log a training line every N iterations and at the end of each epoch (0: only then)")
    g.add_argument("--keep-checkpoints", type=smc.positive_int, default=2, help="checkpoints to keep")
    g.add_argument("--resume", type=smc.str2bool, default=True,
                   help="resume from the newest checkpoint in the checkpoint dir")
    g.add_argument("--tensorboard", type=smc.str2bool, default=True, help="write TensorBoard scalars (rank 0)")
    g.add_argument("--tensorboard-dir", default=smc.SM_TENSORBOARD_DIR_DEFAULT, help="TensorBoard log dir")

    g = parser.add_argument_group("paths (flag, else SageMaker env var, else SageMaker default)")
    g.add_argument("--train-dir", default=None,
                   help="train channel [default: $SM_CHANNEL_TRAIN or $SM_INPUT_DIR/data/train]")
    g.add_argument("--val-dir", default=None,
                   help="validation channel [default: $SM_CHANNEL_VAL or $SM_INPUT_DIR/data/val; without one, "
                        "a val* split inside the train channel, else no validation]")
    g.add_argument("--train-split", default=None,
                   help="train split name, e.g. train2017 [default: autodetected from annotations/instances_*.json]")
    g.add_argument("--val-split", default=None, help="validation split name [default: autodetected]")
    g.add_argument("--pretrained-dir", default=None,
                   help="dir holding <network>-<hash>.params [default: $SM_CHANNEL_PRETRAINED or "
                        "$SM_INPUT_DIR/data/pretrained]")
    g.add_argument("--model-dir", default=None,
                   help=f"model output dir [default: $SM_MODEL_DIR or {smc.SM_MODEL_DIR_DEFAULT}]")
    g.add_argument("--checkpoint-dir", default=None,
                   help=f"checkpoint dir [default: $SM_CHECKPOINT_DIR or {smc.SM_CHECKPOINT_DIR_DEFAULT}]")
    g.add_argument("--output-data-dir", default=None,
                   help=f"validation results JSON [default: $SM_OUTPUT_DATA_DIR or {smc.SM_OUTPUT_DATA_DIR_DEFAULT}]")
    del p
    return parser


def resolve_paths(args, environ=None):
    environ = os.environ if environ is None else environ
    if args.model_dir and "://" in args.model_dir:
        smc.warn(args.prog, f"ignoring --model-dir {args.model_dir} (not a local path); using $SM_MODEL_DIR")
        args.model_dir = None
    args.model_dir = smc.resolve_path(args.model_dir, "SM_MODEL_DIR", smc.SM_MODEL_DIR_DEFAULT, environ)
    args.checkpoint_dir = smc.resolve_path(args.checkpoint_dir, "SM_CHECKPOINT_DIR",
                                           smc.SM_CHECKPOINT_DIR_DEFAULT, environ)
    args.output_data_dir = smc.resolve_path(args.output_data_dir, "SM_OUTPUT_DATA_DIR",
                                            smc.SM_OUTPUT_DATA_DIR_DEFAULT, environ)
    args.train_channel, args.train_dir = train_source(args.train_dir, environ)
    args.val_dir_explicit = bool(args.val_dir) or smc.channel_exists("val", environ)
    args.val_dir = smc.channel_dir("val", args.val_dir, environ)
    args.pretrained_dir = smc.channel_dir("pretrained", args.pretrained_dir, environ)


def train_source(flag_dir, environ=None):
    """(channel name, directory) of the training data: --train-dir, else the `train` channel, else the
    walkthrough's `data` channel (COCO's own layout). Both channels at once is ambiguous: an error."""
    environ = os.environ if environ is None else environ
    if flag_dir:
        return "train", flag_dir
    has_train, has_data = smc.channel_exists("train", environ), smc.channel_exists(DATA_CHANNEL, environ)
    if has_train and has_data:
        raise smc.EntrypointError(
            f"both a 'train' and a '{DATA_CHANNEL}' channel were given: pass one of them, either 'train' (and "
            f"optionally 'val') or '{DATA_CHANNEL}' in COCO's layout (annotations/, {DATA_TRAIN_SPLIT}/, "
            f"{DATA_VAL_SPLIT}/)")
    if has_data:
        return DATA_CHANNEL, smc.channel_dir(DATA_CHANNEL, None, environ)
    return "train", smc.channel_dir("train", None, environ)


def check_distribution(args, env, environ=None):
    """Configuration errors that need no data: fail before anything is loaded."""
    environ = os.environ if environ is None else environ
    if not args.horovod:
        hosts = _job_hosts(environ)
        if len(hosts) > 1:
            raise smc.EntrypointError(
                f"--horovod false runs one process on one host, but this job spans {len(hosts)} hosts "
                f"({', '.join(hosts)}): use --horovod true for multi-host training or a single instance")
        if env.size > 1:
            raise smc.EntrypointError(
                f"--horovod false runs one process over all devices, but {env.size} ranks were launched")


def _job_hosts(environ):
    """The hosts this program's job spans: in a heterogeneous cluster, the distribution instance groups'
    hosts (SM_TRAINING_ENV's distribution_hosts), or this host alone when it is outside them; else SM_HOSTS."""
    current = environ.get("SM_CURRENT_HOST")
    try:
        distribution = json.loads(environ.get("SM_TRAINING_ENV") or "{}").get("distribution_hosts")
    except (ValueError, AttributeError):
        distribution = None
    if current and isinstance(distribution, list) and distribution:
        return [str(h) for h in distribution] if current in distribution else [current]
    return _sm_hosts(environ)


def _sm_hosts(environ):
    text = environ.get("SM_HOSTS")
    if not text:
        return []
    try:
        hosts = json.loads(text)
    except ValueError:
        raise smc.EntrypointError(f"SM_HOSTS is not valid JSON: {text!r}") from None
    if not isinstance(hosts, list):
        raise smc.EntrypointError(f"SM_HOSTS must be a JSON list of host names, got {text!r}")
    return [str(h) for h in hosts]


# --------------------------------------------------------------------------------------------
# Input validation (standard library only)


class ChannelData:
    """One split of a COCO-layout channel, parsed and checked."""

    def __init__(self, channel, directory, split, annotation_file, image_dir, data, usable_images):
        self.channel, self.directory, self.split = channel, directory, split
        self.annotation_file, self.image_dir, self.data = annotation_file, image_dir, data
        self.usable_images = usable_images

    @property
    def num_images(self):
        return len(self.data["images"])

    def describe(self):
        return (f"{self.channel}: {self.annotation_file} ({self.num_images} images, {self.usable_images} with "
                f"usable objects, {len(self.data['annotations'])} annotations)")


def annotation_splits(directory):
    """{split: annotation file} for annotations/instances_<split>.json in a channel dir."""
    ann_dir = os.path.join(directory, "annotations")
    found = {}
    try:
        names = sorted(os.listdir(ann_dir))
    except (FileNotFoundError, NotADirectoryError):
        return found
    for name in names:
        m = re.fullmatch(r"instances_(.+)\.json", name)
        if m and os.path.isfile(os.path.join(ann_dir, name)):
            found[m.group(1)] = os.path.join(ann_dir, name)
    return found


def choose_split(channel, directory, requested, prefix):
    """The split to use in a channel: the requested one, else the only one, else the one named prefix*."""
    splits = annotation_splits(directory)
    if requested:
        path = os.path.join(directory, "annotations", f"instances_{requested}.json")
        if not os.path.isfile(path):
            raise smc.EntrypointError(f"missing annotation file for {channel} split '{requested}': {path}")
        return requested, path
    if not splits:
        raise smc.EntrypointError(
            f"missing annotation file: no annotations/instances_<split>.json in {channel} channel {directory} "
            f"(expected e.g. {os.path.join(directory, 'annotations', f'instances_{prefix}2017.json')})")
    if len(splits) == 1:
        return next(iter(splits.items()))
    matching = {s: p for s, p in splits.items() if s.startswith(prefix)}
    if len(matching) == 1:
        return next(iter(matching.items()))
    raise smc.EntrypointError(
        f"cannot tell which split to use in {channel} channel {directory}: found {', '.join(sorted(splits))}; "
        f"pass --{channel}-split")


def load_channel(channel, directory, split, annotation_file, masks, require_usable):
    """Parses and checks one split: categories, image files, annotation sanity, usable image count."""
    try:
        with open(annotation_file, "rb") as f:
            data = json.load(f)
    except OSError as exc:
        raise smc.EntrypointError(f"cannot read annotation file {annotation_file}: {exc}") from None
    except ValueError as exc:
        raise smc.EntrypointError(f"annotation file is not valid JSON: {annotation_file}: {exc}") from None
    if not isinstance(data, dict):
        raise smc.EntrypointError(f"annotation file must hold a JSON object: {annotation_file}")
    for key in ("images", "annotations", "categories"):
        if not isinstance(data.get(key), list):
            raise smc.EntrypointError(f"annotation file has no '{key}' list: {annotation_file}")

    names = [c.get("name") if isinstance(c, dict) else None for c in data["categories"]]
    if names != COCO_CLASSES:
        if len(names) != len(COCO_CLASSES):
            detail = f"found {len(names)} categories"
        else:
            i = next(i for i, (a, b) in enumerate(zip(names, COCO_CLASSES)) if a != b)
            detail = f"category #{i} is {names[i]!r}, expected {COCO_CLASSES[i]!r}"
        raise smc.EntrypointError(
            f"categories are not COCO's 80 categories in COCO order ({detail}); GluonCV's COCO models and "
            f"datasets need exactly those: {annotation_file}")
    cat_ids = [c.get("id") for c in data["categories"]]
    if len(set(cat_ids)) != len(cat_ids):
        raise smc.EntrypointError(f"duplicate category ids in {annotation_file}")
    cat_ids = set(cat_ids)

    image_dir = os.path.join(directory, split)
    images = {}
    missing = []
    for entry in data["images"]:
        if not isinstance(entry, dict) or not all(k in entry for k in ("id", "file_name", "width", "height")):
            raise smc.EntrypointError(f"image entry without id/file_name/width/height in {annotation_file}: "
                                      f"{str(entry)[:200]}")
        if entry["id"] in images:
            raise smc.EntrypointError(f"duplicate image id {entry['id']} in {annotation_file}")
        images[entry["id"]] = entry
        path = os.path.join(image_dir, entry["file_name"])
        if not os.path.isfile(path):
            missing.append(path)
    if missing:
        raise smc.EntrypointError(
            f"image referenced but absent: {missing[0]} ({len(missing)} of {len(images)} images listed in "
            f"{annotation_file} are missing under {image_dir})")

    usable = set()
    for ann in data["annotations"]:
        if not isinstance(ann, dict) or not all(k in ann for k in ("image_id", "category_id", "bbox")):
            raise smc.EntrypointError(f"annotation without image_id/category_id/bbox in {annotation_file}: "
                                      f"{str(ann)[:200]}")
        entry = images.get(ann["image_id"])
        if entry is None:
            raise smc.EntrypointError(f"annotation {ann.get('id')} refers to unknown image id {ann['image_id']} "
                                      f"in {annotation_file}")
        if ann["category_id"] not in cat_ids:
            raise smc.EntrypointError(f"annotation {ann.get('id')} has unknown category id {ann['category_id']} "
                                      f"in {annotation_file}")
        bbox = ann["bbox"]
        if not (isinstance(bbox, list) and len(bbox) == 4 and all(isinstance(v, (int, float)) for v in bbox)):
            raise smc.EntrypointError(f"annotation {ann.get('id')} has a malformed bbox {bbox!r} in {annotation_file}")
        if ann.get("ignore", 0) == 1:
            continue
        crowd = ann.get("iscrowd", 0) == 1
        if masks and not crowd and not isinstance(ann.get("segmentation"), list):
            raise smc.EntrypointError(
                f"annotation {ann.get('id')} (iscrowd=0) needs a polygon list 'segmentation' for Mask R-CNN in "
                f"{annotation_file}")
        if _usable(ann, entry, masks):
            usable.add(ann["image_id"])
    if require_usable and not usable:
        raise smc.EntrypointError(
            f"empty {channel} set: none of the {len(images)} images in {annotation_file} has a usable object "
            f"annotation (non-crowd{' polygon' if masks else ''}, positive area and box)")
    if not images:
        raise smc.EntrypointError(f"empty {channel} set: no images in {annotation_file}")
    return ChannelData(channel, directory, split, annotation_file, image_dir, data, len(usable))


def _usable(ann, entry, masks):
    """The rules GluonCV's COCODetection / COCOInstance apply when they keep an object."""
    x, y, w, h = (float(v) for v in ann["bbox"])
    width, height = float(entry["width"]), float(entry["height"])
    area = float(ann.get("area", w * h))
    if masks:  # COCOInstance: no crowd, exact box clipped to the image, area > 1, box area >= 4
        if ann.get("iscrowd", 0) == 1:
            return False
        x1, y1 = min(width, max(0.0, x)), min(height, max(0.0, y))
        x2, y2 = min(width, max(0.0, x + max(0.0, w))), min(height, max(0.0, y + max(0.0, h)))
        polygons = [p for p in ann.get("segmentation", []) if isinstance(p, list) and len(p) >= 6]
        return area > 1 and x2 > x1 and y2 > y1 and (x2 - x1) * (y2 - y1) >= 4 and bool(polygons)
    # COCODetection: legacy inclusive corners (x2 = x + w - 1) clipped to [0, size - 1]
    x1, y1 = min(width - 1, max(0.0, x)), min(height - 1, max(0.0, y))
    x2 = min(width - 1, max(0.0, x + max(w - 1, 0.0)))
    y2 = min(height - 1, max(0.0, y + max(h - 1, 0.0)))
    return area > 0 and x2 > x1 and y2 > y1


def check_data_channel_layout(directory, train_split, val_split):
    """The `data` channel must hold COCO's layout for the splits the job uses (val_split None: the val
    channel validates instead); the first missing path is an error naming the channel and the path."""
    if not os.path.isdir(directory):
        raise smc.EntrypointError(f"missing {DATA_CHANNEL} channel: directory {directory} does not exist")
    needed = []
    for split in filter(None, (train_split, val_split)):
        needed += [(os.path.join(directory, "annotations", f"instances_{split}.json"), os.path.isfile),
                   (os.path.join(directory, split), os.path.isdir)]
    for path, exists in needed:
        if not exists(path):
            layout = ", ".join(os.path.relpath(p, directory) + ("/" if check is os.path.isdir else "")
                               for p, check in needed)
            raise smc.EntrypointError(f"channel '{DATA_CHANNEL}' is incomplete: missing {path} (it must hold COCO's "
                                      f"layout: {layout})")


def load_data_channel(args, kind):
    """(train, val) from the walkthrough's `data` channel: train2017 trains, val2017 validates (--train-split
    and --val-split rename them; a `val` channel, when given, validates instead)."""
    train_split = args.train_split or DATA_TRAIN_SPLIT
    val_split = None if args.val_dir_explicit else (args.val_split or DATA_VAL_SPLIT)
    check_data_channel_layout(args.train_dir, train_split, val_split)
    ann = os.path.join(args.train_dir, "annotations")
    train = load_channel("train", args.train_dir, train_split, os.path.join(ann, f"instances_{train_split}.json"),
                         kind.masks, require_usable=True)
    if val_split is None:
        return train, load_val_channel(args, kind)
    val = load_channel("val", args.train_dir, val_split, os.path.join(ann, f"instances_{val_split}.json"),
                       kind.masks, require_usable=False)
    return train, val


def load_val_channel(args, kind):
    if not os.path.isdir(args.val_dir):
        raise smc.EntrypointError(f"missing val channel: directory {args.val_dir} does not exist")
    vsplit, vpath = choose_split("val", args.val_dir, args.val_split, DEFAULT_VAL_SPLIT_PREFIX)
    return load_channel("val", args.val_dir, vsplit, vpath, kind.masks, require_usable=False)


def load_inputs(args, kind):
    """(train ChannelData, val ChannelData or None). From the `data` channel: see load_data_channel.
    Else validation data is the val channel when there is one; else a val* split next to the train split
    in the train channel; else none (a warning)."""
    if args.train_channel == DATA_CHANNEL:
        return load_data_channel(args, kind)
    if not os.path.isdir(args.train_dir):
        raise smc.EntrypointError(f"missing train channel: directory {args.train_dir} does not exist")
    split, path = choose_split("train", args.train_dir, args.train_split, DEFAULT_TRAIN_SPLIT_PREFIX)
    train = load_channel("train", args.train_dir, split, path, kind.masks, require_usable=True)
    val = None
    if args.val_dir_explicit:
        val = load_val_channel(args, kind)
    else:
        others = {s: p for s, p in annotation_splits(args.train_dir).items() if s != split}
        if args.val_split:
            vpath = os.path.join(args.train_dir, "annotations", f"instances_{args.val_split}.json")
            if not os.path.isfile(vpath):
                raise smc.EntrypointError(f"missing annotation file for val split '{args.val_split}': {vpath}")
            val = load_channel("val", args.train_dir, args.val_split, vpath, kind.masks, require_usable=False)
        else:
            candidates = {s: p for s, p in others.items() if s.startswith(DEFAULT_VAL_SPLIT_PREFIX)}
            if len(candidates) == 1:
                vsplit, vpath = next(iter(candidates.items()))
                val = load_channel("val", args.train_dir, vsplit, vpath, kind.masks, require_usable=False)
    return train, val


def train_shard(args, env, val, config):
    """This rank's channel_sharding.Shard of the training data. Validation is scored on rank 0 against the
    whole validation set's annotations, so a val set from a ShardedByS3Key channel (a part per host) is an
    error rather than a silently partial mAP."""
    shard = channel_sharding.shard_for(config, args.train_channel, env)
    val_channel = "val" if args.val_dir_explicit else args.train_channel
    if val is not None and channel_sharding.s3_distribution(config, val_channel) == channel_sharding.SHARDED_BY_S3_KEY:
        fix = "give it as a FullyReplicated 'val' channel" if val_channel != "val" else "make it FullyReplicated"
        raise smc.EntrypointError(
            f"the validation data comes from channel '{val_channel}', which is ShardedByS3Key (each host holds a "
            f"part), but COCO mAP is computed on rank 0 over the whole validation set: {fix}")
    return shard


# --------------------------------------------------------------------------------------------
# Pretrained backbone


def mxnet_models_dir(environ=None):
    environ = os.environ if environ is None else environ
    home = environ.get("MXNET_HOME") or os.path.join(os.path.expanduser("~"), ".mxnet")
    return os.path.join(home, "models")


def ensure_pretrained_base(args, env, environ=None):
    """Makes sure GluonCV finds the backbone weights locally, so `get_model` never starts a download
    of its own (which has no timeout and waits up to 300 s on a lock file).

    Order: $MXNET_HOME/models/<network>-<hash>.params; the `pretrained` channel (linked into
    $MXNET_HOME/models); a bounded download (local rank 0 of each host; the others wait for the
    file); else a one-line error saying how to provide the file.
    """
    from gluoncv.model_zoo import model_store
    from gluoncv.utils import check_sha1

    environ = os.environ if environ is None else environ
    network = args.network
    if network not in model_store._model_sha1:
        raise smc.EntrypointError(
            f"GluonCV has no pretrained ImageNet weights for backbone '{network}'; pass --pretrained-base false")
    sha1 = model_store._model_sha1[network]
    file_name = f"{network}-{sha1[:8]}.params"
    models_dir = mxnet_models_dir(environ)
    target = os.path.join(models_dir, file_name)
    how_to = (f"put {file_name} into $MXNET_HOME/models (here {models_dir}), e.g. by adding a 'pretrained' "
              f"channel (SM_CHANNEL_PRETRAINED / --pretrained-dir) that holds the file, or pass "
              f"--pretrained-base false")

    def verified(path):
        if not check_sha1(path, sha1):
            raise smc.EntrypointError(f"pretrained weights {path} do not match GluonCV's SHA-1 {sha1}: {how_to}")
        return path

    if os.path.isfile(target):
        return verified(target)
    for candidate in (os.path.join(args.pretrained_dir, file_name),
                      os.path.join(args.pretrained_dir, "models", file_name)):
        if os.path.isfile(candidate):
            verified(candidate)
            os.makedirs(models_dir, exist_ok=True)
            _link_or_copy(candidate, target)
            return target
    if not args.download_pretrained:
        raise smc.EntrypointError(f"pretrained backbone weights {file_name} not found in {models_dir} and "
                                  f"--download-pretrained is false: {how_to}")
    repo_url = environ.get("MXNET_GLUON_REPO", model_store.apache_repo_url)
    if not repo_url.endswith("/"):
        repo_url += "/"
    url = model_store._url_format.format(repo_url=repo_url, file_name=file_name[:-len(".params")])
    if env.local_rank == 0:
        try:
            _download_params(url, target, sha1, check_sha1)
        except (OSError, ValueError, zipfile.BadZipFile, urllib.error.URLError) as exc:
            raise smc.EntrypointError(f"pretrained backbone weights {file_name} not found in {models_dir} and the "
                                      f"GluonCV model store is unreachable ({url}: {exc}): {how_to}") from None
        return target
    deadline = time.time() + DOWNLOAD_DEADLINE_SECONDS + 60
    while not os.path.isfile(target):  # local rank 0 downloads (or fails, and mpirun ends the job)
        if time.time() > deadline:
            raise smc.EntrypointError(f"timed out waiting for local rank 0 to download {file_name}: {how_to}")
        time.sleep(1)
    return verified(target)


def _link_or_copy(source, target):
    tmp = f"{target}.tmp-{os.getpid()}"
    try:
        os.symlink(os.path.abspath(source), tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def _download_params(url, target, sha1, check_sha1):
    """Downloads GluonCV's <name>.zip with socket timeouts and an overall deadline; atomic install."""
    deadline = time.time() + DOWNLOAD_DEADLINE_SECONDS
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(target)) as tmp:
        zip_path = os.path.join(tmp, "weights.zip")
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response, open(zip_path, "wb") as out:
            while True:
                if time.time() > deadline:
                    raise OSError(f"download took longer than {DOWNLOAD_DEADLINE_SECONDS} s")
                chunk = response.read(1 << 20)
                if not chunk:
                    break
                out.write(chunk)
        with zipfile.ZipFile(zip_path) as zf:
            zf.extract(os.path.basename(target), tmp)
        extracted = os.path.join(tmp, os.path.basename(target))
        if not check_sha1(extracted, sha1):
            raise ValueError("downloaded file has the wrong SHA-1")
        os.replace(extracted, target)


# --------------------------------------------------------------------------------------------
# Schedules and sampling (pure functions, unit-tested)


def learning_rate(args, base_lr, epoch, iteration, steps_per_epoch):
    """lr at (epoch, iteration within it): step decay by epoch x linear warmup by global iteration."""
    lr = base_lr * args.lr_decay ** sum(1 for e in args.lr_decay_epoch if epoch >= e)
    global_iter = epoch * steps_per_epoch + iteration
    if args.lr_warmup and global_iter < args.lr_warmup:
        alpha = global_iter / args.lr_warmup
        lr *= args.lr_warmup_factor * (1 - alpha) + alpha
    return lr


def steps_per_epoch(num_items, world_size, per_rank_batch, cap=0):
    steps = (num_items // world_size) // per_rank_batch
    return min(steps, cap) if cap else steps


def epoch_batches(np, num_items, aspect_ratios, seed, epoch, rank, world_size, per_rank_batch, steps,
                  bucket_batches=32):
    """This rank's `steps` batches (lists of dataset indexes) of an epoch.

    One permutation per epoch, the same on every rank (seeded by seed and epoch), rank r takes
    positions r, r + size, ...: disjoint shards, each image once per epoch at most. Inside buckets of
    `bucket_batches` batches the images are sorted by aspect ratio (less padding, as GluonCV's
    SplitSortedBucketSampler), then the batch order is shuffled.
    """
    rng = np.random.default_rng([seed & 0xFFFFFFFF, epoch])
    mine = rng.permutation(num_items)[rank::world_size][:steps * per_rank_batch]
    batches = []
    bucket = per_rank_batch * bucket_batches
    for begin in range(0, len(mine), bucket):
        chunk = sorted(mine[begin:begin + bucket].tolist(), key=lambda i: aspect_ratios[i])
        batches.extend(chunk[k:k + per_rank_batch] for k in range(0, len(chunk), per_rank_batch))
    order = np.random.default_rng([seed & 0xFFFFFFFF, epoch, rank]).permutation(len(batches))
    return [batches[i] for i in order]


def val_shard(num_items, rank, world_size):
    """Contiguous [start, end) of the validation images for a rank (sizes differ by at most one)."""
    base, rest = divmod(num_items, world_size)
    start = base * rank + min(rank, rest)
    return start, start + base + (1 if rank < rest else 0)


class _ListBatchSampler:
    def __init__(self, batches):
        self._batches = batches

    def __iter__(self):
        return iter(self._batches)

    def __len__(self):
        return len(self._batches)


# --------------------------------------------------------------------------------------------
# Horovod stand-in for --horovod false


class NoHorovod:
    """The few Horovod calls the job makes, for a single process (no hvd import at all)."""

    Sum = "sum"

    def rank(self):
        return 0

    def size(self):
        return 1

    def local_rank(self):
        return 0

    def allgather_object(self, obj, name=None):
        return [obj]

    def broadcast_object(self, obj, root_rank=0, name=None):
        return obj

    def shutdown(self):
        pass


# --------------------------------------------------------------------------------------------
# GluonCV datasets reading our layout


def make_datasets(kind, train, val, gdata):
    """GluonCV COCODetection / COCOInstance subclasses on already-parsed annotations, with image paths
    from <channel>/<split>/<file_name> (GluonCV 0.10 derives them from ``coco_url``, which custom data
    often lacks)."""
    from pycocotools.coco import COCO

    def coco_from(channel):
        coco = COCO()
        coco.dataset = channel.data
        with contextlib.redirect_stdout(io.StringIO()):
            coco.createIndex()
        return coco

    base = gdata.COCOInstance if kind.masks else gdata.COCODetection

    class Dataset(base):
        def __init__(self, channel, **kwargs):
            self._channel = channel
            self._prebuilt_coco = coco_from(channel)
            super().__init__(root=channel.directory, splits=[f"instances_{channel.split}"], **kwargs)

        def _image_path(self, entry):
            return os.path.join(self._channel.image_dir, entry["file_name"])

        def _load_jsons(self):
            coco = self._prebuilt_coco
            self._coco.append(coco)
            cat_ids = coco.getCatIds()
            self.json_id_to_contiguous = {v: k for k, v in enumerate(cat_ids)}
            self.contiguous_id_to_json = {v: k for k, v in self.json_id_to_contiguous.items()}
            items, labels, segms, ratios = [], [], [], []
            for entry in coco.loadImgs(sorted(coco.getImgIds())):
                if kind.masks:
                    label, segm = self._check_load_bbox(coco, entry)
                    if self._skip_empty and label is None:
                        continue
                    segms.append(segm)
                else:
                    label = self._check_load_bbox(coco, entry)
                    if not label:
                        continue
                items.append(self._image_path(entry))
                labels.append(label)
                ratios.append(float(entry["width"]) / entry["height"])
            if kind.masks:
                return items, labels, segms, ratios
            return items, labels, ratios

    train_ds = Dataset(train, skip_empty=True)
    val_ds = Dataset(val, skip_empty=False) if val is not None else None
    return train_ds, val_ds


# --------------------------------------------------------------------------------------------
# The job


class Stopped(Exception):
    pass


class Job:
    def __init__(self, kind, args, env, train, val, stop, shard):
        self.kind, self.args, self.env, self.train_data, self.val_data, self.stop = kind, args, env, train, val, stop
        self.shard = shard  # which part of the train images this rank trains on (channel_sharding.Shard)
        self.tb = self.hvd = None
        self.rank = env.rank

    # ---- setup

    def log(self, message):
        if self.rank == 0:
            smc.log(message)

    def setup(self):
        args, kind = self.args, self.kind
        import mxnet as mx
        import numpy as np

        self.mx, self.np = mx, np
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        # Known, harmless noise of MXNet / GluonCV / pycocotools on this model family.
        for message in (r".*Recorded .* out of .* validation images", r"Constant parameter .* grad_req",
                        r"Parameter .* is not used by any computation", r"Mean of empty slice",
                        r"invalid value encountered in"):
            warnings.filterwarnings("ignore", message=message)
        num_gpus = mx.context.num_gpus()
        if args.amp and num_gpus == 0:
            raise smc.EntrypointError("amp needs a GPU (mxnet.contrib.amp mixed precision): MXNet sees no GPU "
                                      "here; pass --amp false for CPU training")
        import gluoncv

        self.gcv = gluoncv
        if args.pretrained_base:
            self.pretrained_path = ensure_pretrained_base(args, self.env)
        else:
            self.pretrained_path = None

        if args.horovod:
            try:
                import horovod.mxnet as hvd
            except ImportError as exc:
                if self.env.size > 1:
                    raise smc.EntrypointError(f"{self.env.size} ranks were launched but horovod.mxnet cannot be "
                                              f"imported: {exc}") from None
                smc.warn(kind.prog, f"horovod.mxnet is not importable ({exc}); training as one process")
                hvd = NoHorovod()
            else:
                hvd.init()
                if (hvd.rank(), hvd.size()) != (self.env.rank, self.env.size) and self.env.size > 1:
                    raise smc.EntrypointError(f"Horovod says rank {hvd.rank()} of {hvd.size()}, the MPI "
                                              f"environment said {self.env.rank} of {self.env.size}")
        else:
            hvd = NoHorovod()
        self.hvd = hvd
        self.distributed = not isinstance(hvd, NoHorovod) and hvd.size() > 1
        self.rank, self.size = hvd.rank(), hvd.size()
        if isinstance(hvd, NoHorovod):
            self.ctx = [mx.gpu(i) for i in range(num_gpus)] or [mx.cpu()]
        else:
            self.ctx = [mx.gpu(hvd.local_rank())] if num_gpus else [mx.cpu()]
        self.per_rank_batch = args.batch_size * len(self.ctx)
        self.global_batch = self.per_rank_batch * self.size
        self.base_lr = args.lr * self.global_batch / LR_REFERENCE_BATCH

        gluoncv.utils.random.seed(args.seed)
        if args.amp:
            from mxnet.contrib import amp

            amp.init()
            self.amp = amp
        self.net_name = kind.model_name(args.network, args.use_fpn)
        self.net = self.build_net()
        self.build_data()
        self.build_trainer()
        self.checkpoints = smc.CheckpointManager(args.checkpoint_dir, prefix=self.net_name,
                                                 keep=args.keep_checkpoints)
        self.start_epoch, self.skip_batches = 0, 0
        self.best_map, self.best_epoch, self.history = -1.0, None, []
        if args.resume:
            self.resume()
        if self.distributed:
            hvd.broadcast_parameters(self.net.collect_params(), root_rank=0)
        self.tb = smc.TensorBoardWriter(args.tensorboard_dir, args.tensorboard and self.rank == 0)

    def build_net(self):
        args = self.args
        try:
            net = self.gcv.model_zoo.get_model(self.net_name, pretrained=False,
                                               pretrained_base=bool(args.pretrained_base),
                                               per_device_batch_size=args.batch_size)
        except ValueError:
            if self.net_name not in self.gcv.model_zoo.get_model_list():
                known = sorted(n for n in self.gcv.model_zoo.get_model_list()
                               if n.startswith(self.kind.family) and n.endswith("_coco"))
                raise smc.EntrypointError(f"GluonCV has no model {self.net_name} (--network {args.network}, "
                                          f"--use-fpn {args.use_fpn}); COCO models: {', '.join(known)}") from None
            raise
        # Validation cost on CPU is dominated by the number of proposals: make it a knob.
        if args.rpn_test_post_nms != net._rpn_test_post_nms:
            net._rpn_test_post_nms = args.rpn_test_post_nms
            net.rpn._test_post_nms = args.rpn_test_post_nms
            if hasattr(net, "_rcnn_max_dets"):
                net._rcnn_max_dets = min(net._rcnn_max_dets, args.rpn_test_post_nms)
        for param in net.collect_params().values():
            if param._data is None:  # not loaded from the pretrained backbone
                param.initialize()
        net.collect_params().reset_ctx(self.ctx)
        self.materialize(net)
        net.collect_params().setattr("grad_req", "null")
        net.collect_train_params().setattr("grad_req", "write")
        for param in net.collect_params(".*bias").values():
            param.wd_mult = 0.0
        return net

    def materialize(self, net):
        """One tiny forward pass so that no parameter is left with a deferred shape: checkpoints,
        broadcasts and saves then see every parameter. In training mode (without recording):
        MKLDNN reorders convolution weights in place in inference mode, and Horovod cannot send
        such arrays."""
        mx = self.mx
        ctx = self.ctx[0]
        # 256 px: enough anchors for the RPN's training-time proposal count (2000)
        x = mx.nd.zeros((1, 3, 256, 256), ctx=ctx)
        gt_box = mx.nd.array([[[16, 16, 160, 160]]], ctx=ctx)
        gt_label = mx.nd.zeros((1, 1, 1), ctx=ctx)
        if self.args.batch_size > 1:
            x, gt_box, gt_label = (mx.nd.repeat(a, self.args.batch_size, axis=0) for a in (x, gt_box, gt_label))
        with mx.autograd.train_mode():
            net(x, gt_box, gt_label)  # FPN variants return nested lists: wait for everything
        mx.nd.waitall()

    def build_data(self):
        mx, np, args, kind = self.mx, self.np, self.args, self.kind
        gdata = self.gcv.data
        from gluoncv.data import batchify
        from gluoncv.data.transforms.presets import rcnn as presets

        self.train_ds, self.val_ds = make_datasets(kind, self.train_data, self.val_data, gdata)
        if len(self.train_ds) == 0:
            raise smc.EntrypointError(f"empty train set: no usable image in {self.train_data.annotation_file}")
        self.steps = steps_per_epoch(len(self.train_ds), self.shard.count, self.per_rank_batch,
                                     args.max_iterations_per_epoch)
        if self.shard.per_host and self.distributed:
            # Hosts hold parts of different sizes: every rank runs as many iterations as the smallest allows.
            self.steps = min(self.hvd.allgather_object(self.steps, name="rcnn.steps"))
        if self.steps == 0:
            ranks = f"{self.shard.count} ranks per host" if self.shard.per_host else f"{self.size} ranks"
            raise smc.EntrypointError(
                f"train set too small: {len(self.train_ds)} usable images (on some host, for a ShardedByS3Key channel) "
                f"cannot give each of {ranks} a batch of {self.per_rank_batch} images "
                f"({self.train_data.annotation_file})")
        short = args.short
        val_short = short[-1] if isinstance(short, tuple) else short
        net = self.net
        if kind.masks:
            train_tf = presets.MaskRCNNDefaultTrainTransform(short, args.max_size, net, ashape=net.ashape,
                                                             multi_stage=args.use_fpn)
            self.train_batchify = batchify.MaskRCNNTrainBatchify(net, len(self.ctx))
            self.val_tf = presets.MaskRCNNDefaultValTransform(val_short, args.max_size)
            self.val_batchify = batchify.Tuple(*[batchify.Append() for _ in range(2)])
        else:
            train_tf = presets.FasterRCNNDefaultTrainTransform(short, args.max_size, net, ashape=net.ashape,
                                                               multi_stage=args.use_fpn)
            self.train_batchify = batchify.FasterRCNNTrainBatchify(net, len(self.ctx))
            self.val_tf = presets.FasterRCNNDefaultValTransform(val_short, args.max_size)
            self.val_batchify = batchify.Tuple(*[batchify.Append() for _ in range(3)])
        self.train_transformed = self.train_ds.transform(train_tf)
        self.aspect_ratios = np.asarray(self.train_ds.get_im_aspect_ratio(), dtype=np.float64)
        del mx

    def train_loader(self, epoch, skip):
        batches = epoch_batches(self.np, len(self.train_ds), self.aspect_ratios, self.args.seed, epoch,
                                self.shard.index, self.shard.count, self.per_rank_batch, self.steps)
        sampler = _ListBatchSampler(batches[skip:])
        return self.mx.gluon.data.DataLoader(self.train_transformed, batch_sampler=sampler,
                                             batchify_fn=self.train_batchify, num_workers=self.args.num_workers)

    def build_trainer(self):
        mx, args = self.mx, self.args
        optimizer_params = {"learning_rate": self.base_lr, "wd": args.wd, "momentum": args.momentum}
        if args.amp:
            optimizer_params["multi_precision"] = True
        params = self.net.collect_train_params()
        if isinstance(self.hvd, NoHorovod):
            kvstore = args.kv_store if len(self.ctx) > 1 else None
            self.trainer = mx.gluon.Trainer(params, "sgd", optimizer_params, kvstore=kvstore,
                                            update_on_kvstore=False if kvstore else None)
        else:
            self.trainer = self.hvd.DistributedTrainer(params, "sgd", optimizer_params)
        if args.amp:
            self.amp.init_trainer(self.trainer)
        self.rpn_cls_loss = mx.gluon.loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)
        self.rpn_box_loss = mx.gluon.loss.HuberLoss(rho=1.0 / 9.0)  # smooth L1
        self.rcnn_cls_loss = mx.gluon.loss.SoftmaxCrossEntropyLoss()
        self.rcnn_box_loss = mx.gluon.loss.HuberLoss(rho=1.0)
        self.mask_loss = mx.gluon.loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)

    # ---- checkpoints

    def resume(self):
        payload = None
        if self.rank == 0:
            state, stem = self.checkpoints.latest()
            if state is not None:
                files = state["files"]
                self.net.load_parameters(os.path.join(self.args.checkpoint_dir, files["params"]), ctx=self.ctx)
                with open(os.path.join(self.args.checkpoint_dir, files["states"]), "rb") as f:
                    states = f.read()
                payload = {"state": state, "stem": stem, "states": states}
        # Parameters reach the other ranks with broadcast_parameters; optimizer state bytes here.
        payload = self.hvd.broadcast_object(payload, root_rank=0, name="rcnn.resume") if self.distributed \
            else payload
        if payload is None:
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "states")
            with open(path, "wb") as f:
                f.write(payload["states"])
            self.trainer.load_states(path)
        state = payload["state"]
        if state.get("batch") is None:
            self.start_epoch, self.skip_batches = int(state["epoch"]), 0
        else:
            self.start_epoch, self.skip_batches = int(state["epoch"]) - 1, int(state["batch"])
        self.best_map = float(state.get("best_map", -1.0))
        self.best_epoch = state.get("best_epoch")
        self.history = list(state.get("history", []))
        if state.get("world_size") != self.size or state.get("per_rank_batch") != self.per_rank_batch:
            smc.warn(self.kind.prog, f"checkpoint was written with {state.get('world_size')} ranks x "
                                     f"{state.get('per_rank_batch')} images; now {self.size} x {self.per_rank_batch}: "
                                     "the epoch position is approximate")
        at = f"epoch {self.start_epoch}" + (f" iteration {self.skip_batches}" if self.skip_batches else "")
        self.log(f"{self.kind.prog}: resumed from checkpoint {payload['stem']}.params at {at}")

    def save_checkpoint(self, epochs_done, batch=None):
        """Rank 0: params + optimizer states + JSON. epochs_done/batch follow CheckpointManager's naming:
        a complete epoch e (from 0) is saved as epochs_done=e+1; a stop in epoch e after b iterations as
        (e+1, b)."""
        if self.rank != 0:
            return
        state = {"net": self.net_name, "world_size": self.size, "per_rank_batch": self.per_rank_batch,
                 "steps_per_epoch": self.steps, "best_map": self.best_map, "best_epoch": self.best_epoch,
                 "history": self.history, "time": time.time()}
        stem = self.checkpoints.save(epochs_done, state, {"params": self.net.save_parameters,
                                                          "states": self.trainer.save_states}, batch=batch)
        self.log(f"{self.kind.prog}: saved checkpoint {stem}.params")

    # ---- collectives

    def agree_stop(self):
        """True on every rank when any rank got SIGTERM (one tiny allreduce)."""
        flag = 1.0 if self.stop.requested else 0.0
        if not self.distributed:
            return flag > 0
        mx = self.mx
        total = self.hvd.allreduce(mx.nd.array([flag]), op=self.hvd.Sum, name="rcnn.stop")
        return total.asscalar() > 0

    def mean_over_ranks(self, values, name):
        if not self.distributed:
            return list(values)
        mx = self.mx
        out = self.hvd.allreduce(mx.nd.array(values, dtype="float64"), op=self.hvd.Sum, name=name)
        return (out.asnumpy() / self.size).tolist()

    # ---- training

    def forward_backward(self, shard):
        """Losses of one device's share of a batch (GluonCV's R-CNN losses), backward included."""
        mx = self.mx
        autograd = mx.autograd
        if self.kind.masks:
            data, label, gt_mask, rpn_cls_targets, rpn_box_targets, rpn_box_masks = shard
        else:
            data, label, rpn_cls_targets, rpn_box_targets, rpn_box_masks = shard
        with autograd.record():
            gt_label = label[:, :, 4:5]
            gt_box = label[:, :, :4]
            out = self.net(data, gt_box, gt_label)
            if self.kind.masks:
                (cls_pred, box_pred, mask_pred, roi, _samples, matches, rpn_score, rpn_box, _anchors,
                 cls_targets, box_targets, box_masks, indices) = out
            else:
                (cls_pred, box_pred, _roi, _samples, _matches, rpn_score, rpn_box, _anchors,
                 cls_targets, box_targets, box_masks, _indices) = out
            rpn_score = rpn_score.squeeze(axis=-1)
            num_rpn_pos = (rpn_cls_targets >= 0).sum()
            rpn_loss1 = self.rpn_cls_loss(rpn_score, rpn_cls_targets,
                                          rpn_cls_targets >= 0) * rpn_cls_targets.size / num_rpn_pos
            rpn_loss2 = self.rpn_box_loss(rpn_box, rpn_box_targets, rpn_box_masks) * rpn_box.size / num_rpn_pos
            num_rcnn_pos = (cls_targets >= 0).sum()
            rcnn_loss1 = self.rcnn_cls_loss(cls_pred, cls_targets, cls_targets.expand_dims(-1) >= 0) * \
                cls_targets.size / num_rcnn_pos
            rcnn_loss2 = self.rcnn_box_loss(box_pred, box_targets, box_masks) * box_pred.size / num_rcnn_pos
            total = rpn_loss1.sum() + rpn_loss2.sum() + rcnn_loss1.sum() + rcnn_loss2.sum()
            parts = [rpn_loss1.mean(), rpn_loss2.mean(), rcnn_loss1.sum(), rcnn_loss2.sum()]
            if self.kind.masks:
                n = indices.shape[0]
                roi = mx.nd.concat(*[mx.nd.take(roi[i], indices[i]) for i in range(n)], dim=0).reshape((n, -1, 4))
                m_cls_targets = mx.nd.concat(*[mx.nd.take(cls_targets[i], indices[i]) for i in range(n)],
                                             dim=0).reshape((n, -1))
                matches = mx.nd.concat(*[mx.nd.take(matches[i], indices[i]) for i in range(n)],
                                       dim=0).reshape((n, -1))
                mask_targets, mask_masks = self.net.mask_target(roi, gt_mask, matches, m_cls_targets)
                mask_loss = self.mask_loss(mask_pred, mask_targets, mask_masks) * mask_targets.size / \
                    mask_masks.sum()
                total = total + mask_loss.sum()
                parts.append(mask_loss.sum())
            if self.args.amp:
                with self.amp.scale_loss(total, self.trainer) as scaled:
                    autograd.backward(scaled)
            else:
                total.backward()
        return parts

    def split_batch(self, batch):
        """Batchify output -> one tuple of arrays per device, each on its device."""
        shards = []
        for j, ctx in enumerate(self.ctx):
            shard = []
            for element in batch:
                item = element[j] if isinstance(element, (list, tuple)) else element
                shard.append(item.as_in_context(ctx))
            shards.append(shard)
        return shards

    def run(self):
        args, kind = self.args, self.kind
        self.log(f"{kind.prog}: model={self.net_name} world_size={self.size} devices_per_rank={len(self.ctx)} "
                 f"context={self.ctx[0]} batch_per_device={args.batch_size} global_batch={self.global_batch} "
                 f"base_lr={args.lr:g}/{LR_REFERENCE_BATCH}img effective_lr={self.base_lr:g} "
                 f"train_images={len(self.train_ds)} iterations_per_epoch={self.steps} "
                 f"val_images={len(self.val_ds) if self.val_ds is not None else 0} short={args.short} "
                 f"max_size={args.max_size} pretrained_base={self.pretrained_path or False}")
        self.log(self.train_data.describe())
        self.log(f"{kind.prog}: {self.shard.describe()}")
        if self.val_data is not None:
            self.log(self.val_data.describe())
        else:
            self.log(f"{kind.prog}: no validation data (no val channel, no val* split next to the train split)")
        last_epoch = args.epochs - 1
        for epoch in range(self.start_epoch, args.epochs):
            skip = self.skip_batches if epoch == self.start_epoch else 0
            stopped_at = self.train_epoch(epoch, skip)
            if stopped_at is not None:
                self.save_checkpoint(epoch + 1, batch=stopped_at)
                self.finish_stopped()
            record = {"epoch": epoch}
            # A stop requested during the epoch's last iteration skips validation: SageMaker allows
            # about two minutes between SIGTERM and SIGKILL.
            stop_now = self.agree_stop()
            if not stop_now and self.val_ds is not None and \
                    ((epoch + 1) % args.val_interval == 0 or epoch == last_epoch):
                record.update(self.validate(epoch))
                stop_now = self.agree_stop()
            self.history.append(record)
            if record.get(kind.main_metric) is not None and record[kind.main_metric] > self.best_map:
                self.best_map, self.best_epoch = record[kind.main_metric], epoch
                self.save_model("best")
            if epoch == last_epoch or stop_now or (args.save_interval and (epoch + 1) % args.save_interval == 0):
                self.save_checkpoint(epoch + 1)
            if stop_now and epoch < last_epoch:
                self.finish_stopped()
        self.save_model("final")
        self.tb.close()
        self.log(f"{kind.prog}: done; model in {args.model_dir}")

    def train_epoch(self, epoch, skip):
        """One epoch from iteration `skip`. Returns None, or the iteration count at an agreed stop."""
        args, kind = self.args, self.kind
        if args.hybridize:
            self.net.hybridize(static_alloc=False)  # (re)build the training graph
        loader = self.train_loader(epoch, skip)
        sums = [0.0] * len(kind.loss_names)
        count = 0
        epoch_loss, epoch_count = 0.0, 0
        epoch_start = interval_start = time.time()
        iteration = skip
        for batch in loader:
            lr = learning_rate(args, self.base_lr, epoch, iteration, self.steps)
            self.trainer.set_learning_rate(lr)
            shards = self.split_batch(batch)
            parts = [self.forward_backward(shard) for shard in shards]
            self.trainer.step(self.per_rank_batch)
            values = [sum(float(p[k].asscalar()) for p in parts) / len(parts) for k in range(len(sums))]
            if not all(math.isfinite(v) for v in values):
                raise RuntimeError(f"non-finite loss at epoch {epoch} iteration {iteration + 1}: "
                                   f"{dict(zip(kind.loss_names, values))}")
            sums = [s + v for s, v in zip(sums, values)]
            count += 1
            iteration += 1
            epoch_loss += sum(values)
            epoch_count += 1
            if (args.log_interval and iteration % args.log_interval == 0) or iteration == self.steps:
                means = self.mean_over_ranks([s / count for s in sums], "rcnn.log")
                now = time.time()
                rate = count * self.global_batch / max(now - interval_start, 1e-9)
                pairs = [("epoch", epoch), ("iter", iteration), ("loss", float(sum(means)))]
                pairs += [(name, float(v)) for name, v in zip(kind.loss_names, means)]
                pairs += [("lr", f"{lr:.6g}"), ("samples_per_sec", f"{rate:.3f}")]
                self.log(smc.format_metrics(pairs))
                step = epoch * self.steps + iteration
                scalars = {"train/loss": float(sum(means)), "train/lr": lr, "train/samples_per_sec": rate}
                scalars.update({f"train/{n}": float(v) for n, v in zip(kind.loss_names, means)})
                self.tb.scalars(step, scalars)
                sums, count, interval_start = [0.0] * len(sums), 0, now
            if self.agree_stop() and iteration < self.steps:
                return iteration
        seconds = time.time() - epoch_start
        if epoch_count:
            loss, rate = self.mean_over_ranks([epoch_loss / epoch_count, epoch_count / max(seconds, 1e-9)],
                                              "rcnn.epoch")
            self.log(smc.format_metrics([("epoch", epoch), ("train_loss", float(loss)),
                                         ("samples_per_sec", f"{rate * self.global_batch:.3f}"),
                                         ("epoch_sec", float(seconds))]))
        return None

    # ---- validation

    def validate(self, epoch):
        """COCO mAP over the whole validation set: each rank runs a contiguous shard, results are
        gathered to rank 0 with Horovod (allgather of pickled objects) and scored with pycocotools."""
        mx, np, kind = self.mx, self.np, self.kind
        start_time = time.time()
        if self.args.hybridize:
            self.net.hybridize(static_alloc=False)  # drop the training graph: inference takes another path
        start, end = val_shard(len(self.val_ds), self.rank, self.size)
        loader = mx.gluon.data.DataLoader(
            self.val_ds.transform(self.val_tf), batch_size=len(self.ctx), shuffle=False,
            sampler=_ListBatchSampler(list(range(start, end))), batchify_fn=self.val_batchify, last_batch="keep",
            num_workers=self.args.num_workers) if end > start else []
        from gluoncv.nn.bbox import BBoxClipToImage

        clipper = BBoxClipToImage()
        if kind.masks:
            from gluoncv.data.transforms.mask import fill
            from gluoncv.utils.metrics.coco_instance import COCOInstanceMetric

            # Each rank scores its own contiguous shard (starting_id), rank 0 merges the result lists.
            metric = COCOInstanceMetric(self.val_ds, os.path.join(self.args.output_data_dir, f"{kind.prog}_val"),
                                        use_time=False, cleanup=True, starting_id=start)
            metric.reset()
        records = []
        for batch in loader:
            for j, sample in enumerate(zip(*batch)):
                x = sample[0].as_in_context(self.ctx[j % len(self.ctx)])
                if kind.masks:
                    ids, scores, bboxes, masks = self.net(x)
                    im_height, im_width, im_scale = sample[1][0].asnumpy()
                    ids, scores = ids[0].asnumpy(), scores[0].asnumpy()
                    bboxes, masks = bboxes[0].asnumpy(), masks[0].asnumpy()
                    valid = np.where((ids.ravel() >= 0) & (scores.ravel() >= 0.001))[0]
                    bboxes = bboxes[valid] / im_scale
                    full_h, full_w = int(round(im_height / im_scale)), int(round(im_width / im_scale))
                    full_masks = fill(masks[valid], bboxes, (full_w, full_h))
                    metric.update(bboxes, ids[valid], scores[valid], full_masks)
                else:
                    ids, scores, bboxes = self.net(x)
                    bboxes = clipper(bboxes, x)
                    scale = float(sample[2].reshape((-1,)).asscalar())
                    ids, scores = ids[0].asnumpy().ravel(), scores[0].asnumpy().ravel()
                    bboxes = bboxes[0].asnumpy() * scale
                    keep = (ids >= 0) & (scores >= FASTER_VAL_SCORE_THRESH)
                    records.append((len(records) + start, bboxes[keep], ids[keep], scores[keep]))
        local = metric.get_result_buffer() if kind.masks else records
        gathered = self.hvd.allgather_object(local, name=f"rcnn.val.{epoch}") if self.distributed else [local]
        result = {}
        if self.rank == 0:
            result = self.score(gathered)
            result.update(val_images=len(self.val_ds), val_sec=time.time() - start_time)
            pairs = [("epoch", epoch), ("val_bbox_map", result["val_bbox_map"])]
            if kind.masks:
                pairs.append(("val_segm_map", result["val_segm_map"]))
            pairs += [("val_images", result["val_images"]), ("val_sec", float(result["val_sec"]))]
            self.log(smc.format_metrics(pairs))
            self.tb.scalars(epoch, {f"validation/{k[4:]}": v for k, v in result.items() if k.endswith("_map")})
        if self.distributed:  # every rank needs the number to agree on "best"
            result = self.hvd.broadcast_object(result, root_rank=0, name=f"rcnn.valres.{epoch}")
        return result

    def score(self, gathered):
        """Rank 0: COCO mAP from all ranks' results with GluonCV's metrics (pycocotools inside)."""
        np, kind = self.np, self.kind
        os.makedirs(self.args.output_data_dir, exist_ok=True)
        prefix = os.path.join(self.args.output_data_dir, f"{kind.prog}_val_results")
        if kind.masks:
            from gluoncv.utils.metrics.coco_instance import COCOInstanceMetric

            metric = COCOInstanceMetric(self.val_ds, prefix, use_time=False, cleanup=False)
            buffer = metric.get_result_buffer()
            for part in gathered:
                buffer.extend(part)
            if not buffer:  # pycocotools cannot load an empty result list
                return {"val_bbox_map": 0.0, "val_segm_map": 0.0}
            names, values = self._quiet(metric.get)
            self._log_summary(names, values)
            return {"val_bbox_map": float(values[1]) / 100, "val_segm_map": float(values[3]) / 100}
        from gluoncv.utils.metrics.coco_detection import COCODetectionMetric

        metric = COCODetectionMetric(self.val_ds, prefix, use_time=False, cleanup=False,
                                     score_thresh=FASTER_VAL_SCORE_THRESH)
        metric.reset()
        records = sorted((r for part in gathered for r in part), key=lambda r: r[0])
        if [r[0] for r in records] != list(range(len(self.val_ds))):
            raise RuntimeError(f"validation gathered {len(records)} image results for {len(self.val_ds)} images")
        for _, bboxes, ids, scores in records:
            metric.update(bboxes[np.newaxis], ids[np.newaxis], scores[np.newaxis])
        names, values = self._quiet(metric.get)
        self._log_summary(names, values)
        return {"val_bbox_map": float(values[-1]) / 100}

    @staticmethod
    def _quiet(fn):
        with contextlib.redirect_stdout(io.StringIO()):
            return fn()

    def _log_summary(self, names, values):
        for name, value in zip(names, values):
            if "Summary" in name:
                smc.log(f"  {name.strip().strip('~ ')}")
                for line in str(value).splitlines():
                    smc.log(f"  {line.strip()}")

    # ---- outputs

    def save_model(self, tag):
        """Rank 0: <model>-<tag>.params (atomic) and model.json describing how to load it."""
        if self.rank != 0:
            return
        args = self.args
        path = os.path.join(args.model_dir, f"{self.net_name}-{tag}.params")
        smc.atomic_save(path, self.net.save_parameters)
        info = {
            "model": self.net_name,
            "load": f"gluoncv.model_zoo.get_model('{self.net_name}', pretrained=False, pretrained_base=False)"
                    f".load_parameters('{os.path.basename(path)}')",
            "classes": COCO_CLASSES, "short": args.short, "max_size": args.max_size,
            "best_map": self.best_map if self.best_epoch is not None else None, "best_epoch": self.best_epoch,
            "main_metric": self.kind.main_metric, "epochs": args.epochs, "world_size": self.size,
            "global_batch": self.global_batch, "effective_lr": self.base_lr, "history": self.history,
            "files": sorted(n for n in os.listdir(args.model_dir) if n.endswith(".params")),
        }
        smc.atomic_write_json(os.path.join(args.model_dir, "model.json"), info)
        self.log(f"{self.kind.prog}: saved {path}")

    def finish_stopped(self):
        if self.distributed:  # hold every rank until rank 0's checkpoint is on disk
            self.mean_over_ranks([0.0], "rcnn.stop.barrier")
        self.log(f"{self.kind.prog}: stopped by SIGTERM")
        raise Stopped()

    def shutdown(self):
        if self.tb is not None:
            self.tb.close()
        if self.hvd is not None:
            self.hvd.shutdown()


# --------------------------------------------------------------------------------------------
# main


def install_stop_handler():
    """SIGTERM sets a StopRequest in the training process only.

    DataLoader workers are forked from the training process and would inherit a handler that only
    sets a flag: they would then ignore SIGTERM, and multiprocessing.Pool.terminate() (which the
    DataLoader uses on error or at the end of an epoch) would wait for them forever. Forked children
    get the default action back, before they run any Python code of their own.
    """
    stop = smc.StopRequest()
    main_pid = os.getpid()

    def handle(signum, frame):
        if os.getpid() != main_pid:  # a child forked before the at-fork hook existed: die as SIGTERM would
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        stop.signum = signum
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    return stop


def _last_line(exc):
    """MXNet errors carry a C++ traceback in their message: keep the line that says what failed."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else repr(exc)


def _exit(code):
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit: no interpreter shutdown, which can block on Horovod's background thread, MXNet's
    # engine or DataLoader worker pools when another rank has failed.
    os._exit(code)


def main(kind, description, argv=None):
    args = build_parser(kind, description).parse_args(argv)
    args.prog = kind.prog
    stop = install_stop_handler()
    job = None
    try:
        resolve_paths(args)
        env = smc.dist_env()
        check_distribution(args, env)
        # Everything up to Job.setup is local: a bad input fails on every rank before MPI is initialised.
        train, val = load_inputs(args, kind)
        shard = train_shard(args, env, val, smc.input_data_config())
        smc.limit_cpu_threads(env.local_size)  # before mxnet is imported
        job = Job(kind, args, env, train, val, stop, shard)
        job.setup()
        job.run()
        job.shutdown()
    except Stopped:
        _exit(smc.EXIT_SIGTERM)
    except smc.EntrypointError as exc:
        smc.fail(kind.prog, str(exc), exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - any failure must end this rank at once, never hang it
        traceback.print_exc()
        smc.fail(kind.prog, f"unexpected {type(exc).__name__}: {_last_line(exc)}", smc.EXIT_INTERNAL)
    except KeyboardInterrupt:
        smc.fail(kind.prog, "interrupted", 130)
    _exit(smc.EXIT_OK)

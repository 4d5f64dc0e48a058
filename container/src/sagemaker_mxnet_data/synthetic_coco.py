"""A tiny synthetic COCO data set for smoke tests of the R-CNN programs (numpy + Pillow, no mxnet).

Images show filled shapes on a noisy background. Every object has a polygon segmentation (the exact
polygon that was drawn, so masks are pixel-true), a bbox, its area and ``iscrowd=0``.

Categories, either:
  * COCO's (the default): the ``categories`` list is COCO 2017's 80 categories with their real ids, in COCO's
    order; the objects are rectangles (person), ellipses (car) and triangles (dog).
  * K classes of your own (``--classes bolt,nut,washer`` or ``--classes 3`` for class-1..class-3): the
    ``categories`` list holds just those, in the order given, with ids that are neither 1..K nor increasing
    (class i of K, from 0, has id 3 (K - i) + 1: 10, 7, 4 for three), as a user's own export may have them.
    Class i is drawn as shape i mod 5 (rectangle, ellipse, triangle, diamond, pentagon), in colour family
    i // 5, so every class looks the same in every set that lists it at the same position.
Either way the shape decides the category, so a detector can in principle learn it.

Layout written (the same as COCO 2017, so one directory can be both the ``train`` and the ``val``
channel; the R-CNN programs pick the split by the annotation file name)::

    OUT_DIR/annotations/instances_train2017.json
    OUT_DIR/annotations/instances_val2017.json
    OUT_DIR/train2017/000000000001.jpg ...
    OUT_DIR/val2017/000000100001.jpg ...

Image entries carry ``file_name`` (relative to the split folder) and a ``coco_url`` whose last two
path parts are ``<split>/<file_name>``, which is what GluonCV 0.10's own loaders use.

Usage::

    python -m sagemaker_mxnet_data.synthetic_coco OUT_DIR [--train 8] [--val 4] [--image-size 320] [--seed 0]
        [--classes coco|K|NAME,NAME,...]
    synth-data coco OUT_DIR ...            (the same, through the image's synth-data command)
"""

import argparse
import json
import math
import os
import sys

from sagemaker_mxnet_data.coco_categories import COCO_CATEGORIES

PROG = "synth-data coco"
TRAIN_SPLIT = "train2017"
VAL_SPLIT = "val2017"


# shape -> COCO category id
SHAPE_CATEGORIES = {"rectangle": 1, "ellipse": 3, "triangle": 18}
# the shapes of classes of your own, by class index mod their number
CLASS_SHAPES = ("rectangle", "ellipse", "triangle", "diamond", "pentagon")
MIN_IMAGE_SIDE = 32


def categories_json():
    return [{"id": cid, "name": name, "supercategory": sup} for cid, name, sup in COCO_CATEGORIES]


def custom_categories(classes):
    """The categories of classes of your own, in their order: ids 3 (K - i) + 1."""
    k = len(classes)
    return [{"id": 3 * (k - i) + 1, "name": name, "supercategory": "synthetic"} for i, name in enumerate(classes)]


def _check_classes(classes):
    if classes is None:
        return
    if not classes or any(not isinstance(c, str) or not c.strip() for c in classes):
        raise ValueError(f"classes must be non-empty names, got {classes!r}")
    if len(set(classes)) != len(classes):
        raise ValueError(f"class names must be unique, got {classes!r}")


def _shape_colour(rng, family):
    """A fill colour: family 0 any bright colour (COCO's data), family f > 0 bright in channel (f - 1) mod 3 and
    darker in the others."""
    colour = rng.integers(120, 256, size=3)
    if family:
        colour = [int(v) if c == (family - 1) % 3 else int(v) // 2 for c, v in enumerate(colour)]
    return tuple(int(v) for v in colour)


def _image_sizes(image_size):
    """(min side, max side) of the generated images from an int (max side) or a (min, max) pair."""
    if isinstance(image_size, (tuple, list)):
        low, high = int(image_size[0]), int(image_size[1])
    else:
        high = int(image_size)
        low = max(MIN_IMAGE_SIDE, (high * 2) // 3)
    if low < MIN_IMAGE_SIDE or high < low:
        raise ValueError(f"image size must be >= {MIN_IMAGE_SIDE} (and min <= max), got {image_size!r}")
    return low, high


def _shape_polygon(rng, kind, x0, y0, x1, y1):
    """Polygon (flat [x, y, ...] list, floats) of a shape inscribed in the box (x0, y0)-(x1, y1)."""
    if kind == "rectangle":
        points = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    elif kind in ("ellipse", "pentagon"):
        cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
        n, start = (24, 0.0) if kind == "ellipse" else (5, -math.pi / 2)
        points = [(cx + rx * math.cos(start + 2 * math.pi * k / n), cy + ry * math.sin(start + 2 * math.pi * k / n))
                  for k in range(n)]
    elif kind == "diamond":
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        points = [(cx, y0), (x1, cy), (cx, y1), (x0, cy)]
    else:  # triangle: apex somewhere on the top edge
        apex = x0 + float(rng.uniform(0.2, 0.8)) * (x1 - x0)
        points = [(apex, y0), (x1, y1), (x0, y1)]
    return [round(float(v), 2) for point in points for v in point]


def _polygon_area(flat):
    xs, ys = flat[0::2], flat[1::2]
    n = len(xs)
    return abs(sum(xs[i] * ys[(i + 1) % n] - xs[(i + 1) % n] * ys[i] for i in range(n))) / 2.0


def _polygon_bbox(flat):
    xs, ys = flat[0::2], flat[1::2]
    x0, y0 = min(xs), min(ys)
    return [round(x0, 2), round(y0, 2), round(max(xs) - x0, 2), round(max(ys) - y0, 2)]


def make_split(out_dir, split, count, image_size, rng, first_image_id, first_ann_id, classes=None):
    """Writes `count` JPEGs into out_dir/<split>/ and returns the split's COCO annotation dict (COCO's categories, or
    `classes` of your own)."""
    import numpy as np
    from PIL import Image, ImageDraw

    low, high = _image_sizes(image_size)
    image_dir = os.path.join(out_dir, split)
    os.makedirs(image_dir, exist_ok=True)
    images, annotations = [], []
    ann_id = first_ann_id
    if classes is None:
        kinds = sorted(SHAPE_CATEGORIES)
        draw_kinds = [(kind, SHAPE_CATEGORIES[kind], 0) for kind in kinds]
        categories = categories_json()
    else:
        categories = custom_categories(classes)
        draw_kinds = [(CLASS_SHAPES[i % len(CLASS_SHAPES)], c["id"], i // len(CLASS_SHAPES))
                      for i, c in enumerate(categories)]
    for k in range(count):
        image_id = first_image_id + k
        width, height = (int(v) for v in rng.integers(low, high + 1, size=2))
        background = rng.integers(0, 60, size=(height, width, 3), dtype=np.uint8) + np.uint8(40)
        image = Image.fromarray(background, "RGB")
        draw = ImageDraw.Draw(image)
        # Objects in distinct cells of a 2x2 grid: no occlusion, so every polygon is its mask.
        cells = rng.permutation(4)[:int(rng.integers(1, 4))]
        for cell in cells:
            cx0, cy0 = (cell % 2) * width / 2, (cell // 2) * height / 2
            cw, ch = width / 2, height / 2
            bw = float(rng.uniform(0.45, 0.9)) * cw
            bh = float(rng.uniform(0.45, 0.9)) * ch
            x0 = cx0 + float(rng.uniform(0, cw - bw))
            y0 = cy0 + float(rng.uniform(0, ch - bh))
            kind, category_id, family = draw_kinds[int(rng.integers(len(draw_kinds)))]
            polygon = _shape_polygon(rng, kind, x0, y0, x0 + bw, y0 + bh)
            draw.polygon(list(zip(polygon[0::2], polygon[1::2])), fill=_shape_colour(rng, family))
            annotations.append({
                "id": ann_id, "image_id": image_id, "category_id": category_id,
                "segmentation": [polygon], "area": round(_polygon_area(polygon), 2),
                "bbox": _polygon_bbox(polygon), "iscrowd": 0})
            ann_id += 1
        file_name = f"{image_id:012d}.jpg"
        image.save(os.path.join(image_dir, file_name), quality=90)
        images.append({"id": image_id, "file_name": file_name, "width": width, "height": height,
                       "coco_url": f"synthetic://{split}/{file_name}", "license": 1})
    return {
        "info": {"description": "synthetic COCO-format data (sagemaker_mxnet_data.synthetic_coco)",
                 "version": "1.0", "year": 2024},
        "licenses": [{"id": 1, "name": "synthetic", "url": ""}],
        "images": images,
        "annotations": annotations,
        "categories": categories,
    }


def write_coco(out_dir, num_train=8, num_val=4, image_size=320, seed=0, classes=None):
    """Writes the synthetic data set to out_dir (layout in the module docstring).

    image_size: the longest image side (int; sides are drawn from [2/3 of it, it]) or a (min, max)
    pair. classes: None for COCO's 80 categories, else a list of class names. Same arguments, same bytes.
    Returns {split: annotation file path}.
    """
    import numpy as np

    if num_train < 1 or num_val < 0:
        raise ValueError(f"need at least 1 train image and >= 0 val images, got {num_train}/{num_val}")
    _image_sizes(image_size)  # validate before writing anything
    _check_classes(classes)
    rng = np.random.default_rng(seed)
    written = {}
    os.makedirs(os.path.join(out_dir, "annotations"), exist_ok=True)
    next_ann = 1
    for split, count, first_id in ((TRAIN_SPLIT, num_train, 1), (VAL_SPLIT, num_val, 100001)):
        if split == VAL_SPLIT and count == 0:
            continue
        data = make_split(out_dir, split, count, image_size, rng, first_id, next_ann, classes)
        next_ann += len(data["annotations"])
        path = os.path.join(out_dir, "annotations", f"instances_{split}.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
        written[split] = path
    return written


# --------------------------------------------------------------------------------------------
# CLI


def _image_size_arg(text):
    try:
        parts = [int(p) for p in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid image size {text!r}: use N or MIN,MAX") from None
    if len(parts) not in (1, 2):
        raise argparse.ArgumentTypeError(f"invalid image size {text!r}: use N or MIN,MAX")
    value = parts[0] if len(parts) == 1 else tuple(parts)
    try:
        _image_sizes(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _classes_arg(text):
    """coco (None), K (class-1 .. class-K) or comma-separated names."""
    text = text.strip()
    if text == "coco":
        return None
    if text.isdigit():
        if int(text) < 1:
            raise argparse.ArgumentTypeError(f"invalid classes {text!r}: need at least 1 class")
        return [f"class-{i}" for i in range(1, int(text) + 1)]
    names = [name.strip() for name in text.split(",")]
    try:
        _check_classes(names)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid classes {text!r}: use coco, a count, or unique comma-separated "
                                         "names") from None
    return names


def _add_arguments(parser):
    parser.add_argument("out_dir", metavar="OUT_DIR",
                        help="writes OUT_DIR/annotations/instances_{train,val}2017.json, train2017/, val2017/")
    parser.add_argument("--train", type=int, default=8, help="number of training images")
    parser.add_argument("--val", type=int, default=4, help="number of validation images (0: none)")
    parser.add_argument("--image-size", type=_image_size_arg, default=320,
                        help="longest image side N (sides drawn from [2N/3, N]) or MIN,MAX")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    parser.add_argument("--classes", type=_classes_arg, default="coco",
                        help="coco (COCO's 80 categories), a count K (class-1 .. class-K) or NAME,NAME,... (your "
                             "own classes, in that order, with ids that are neither 1..K nor increasing)")
    parser.set_defaults(func=_cmd_coco)


def _cmd_coco(args):
    try:
        written = write_coco(args.out_dir, args.train, args.val, args.image_size, args.seed, args.classes)
    except (ValueError, OSError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    for split, path in written.items():
        print(f"{PROG}: wrote {split}: {path}")
    return 0


def add_subcommand(subparsers):
    """Registers `coco` on an argparse subparsers object (the synth-data CLI); sets args.func."""
    parser = subparsers.add_parser(
        "coco", help="tiny synthetic COCO 2017-layout detection/instance data (R-CNN smoke tests)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Write a tiny synthetic COCO data set (COCO's 80 categories or K of your own, polygon masks).")
    _add_arguments(parser)
    return parser


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m sagemaker_mxnet_data.synthetic_coco",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                                     description="Write a tiny synthetic COCO data set.")
    _add_arguments(parser)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

"""A COCO-like detection/instance data set for input-pipeline benchmarks: COCO 2017's image sizes, object counts and
object sizes, in COCO's layout (annotations/instances_train2017.json, train2017/*.jpg).

The image's `synth-data coco` draws 1-3 large shapes on small noisy images: right for smoke tests, too light for
measuring a pipeline whose cost grows with pixels and objects. This one follows COCO train2017's statistics:
  * images 640 px on the long side, 360-480 on the short one (COCO's mean is 577 x 484), 3 in 4 landscape;
  * a smooth background with texture and noise, JPEG quality 90: about as large as COCO's files (~160 KB each,
    18 GB for 118,287 images) and as slow to decode;
  * 1-15 objects per image (mean ~7, COCO's 7.3), each a polygon of 8-30 vertices (instance masks), sizes log-uniform
    from 12 to 400 px (COCO: 41% small, 34% medium, 24% large), real COCO category ids.

    python coco_like.py OUT_DIR --images 64 [--seed 0]
"""

import argparse
import json
import math
import os

import numpy as np
from PIL import Image, ImageDraw
from sagemaker_mxnet_data.coco_categories import COCO_CATEGORIES

SPLIT = "train2017"


def background(rng, width, height):
    """Low-frequency colour gradients plus mid-frequency texture and pixel noise (natural-image-like JPEG size)."""
    coarse = rng.integers(30, 220, size=(6, 8, 3), dtype=np.uint8)
    image = Image.fromarray(coarse, "RGB").resize((width, height), Image.BICUBIC)
    texture = rng.integers(0, 255, size=(height // 2, width // 2, 3), dtype=np.uint8)
    texture = Image.fromarray(texture, "RGB").resize((width, height), Image.BILINEAR)
    pixels = np.asarray(image, dtype=np.int16) // 2 + np.asarray(texture, dtype=np.int16) // 2
    pixels += rng.normal(0, 14, size=pixels.shape).astype(np.int16)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def polygon(rng, cx, cy, radius, width, height):
    """A star-shaped polygon around (cx, cy), clipped to the image: flat [x, y, ...]."""
    vertices = int(rng.integers(8, 31))
    angles = np.sort(rng.uniform(0, 2 * math.pi, vertices))
    radii = radius * rng.uniform(0.5, 1.0, vertices)
    xs = np.clip(cx + radii * np.cos(angles), 0, width - 1)
    ys = np.clip(cy + radii * np.sin(angles), 0, height - 1)
    return [round(float(v), 2) for pair in zip(xs, ys) for v in pair]


def polygon_area(flat):
    xs, ys = flat[0::2], flat[1::2]
    return abs(sum(xs[i] * ys[(i + 1) % len(xs)] - xs[(i + 1) % len(xs)] * ys[i] for i in range(len(xs)))) / 2


def write(out_dir, count, seed=0):
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(out_dir, SPLIT), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "annotations"), exist_ok=True)
    category_ids = [cid for cid, _, _ in COCO_CATEGORIES]
    images, annotations = [], []
    for image_id in range(1, count + 1):
        long_side, short_side = 640, int(rng.integers(360, 481))
        width, height = (long_side, short_side) if rng.random() < 0.75 else (short_side, long_side)
        image = background(rng, width, height)
        draw = ImageDraw.Draw(image)
        for _ in range(int(np.clip(rng.poisson(6.3) + 1, 1, 15))):
            radius = math.exp(rng.uniform(math.log(6), math.log(200)))
            cx, cy = rng.uniform(0, width), rng.uniform(0, height)
            flat = polygon(rng, cx, cy, radius, width, height)
            xs, ys = flat[0::2], flat[1::2]
            bbox = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
            area = polygon_area(flat)
            if bbox[2] < 2 or bbox[3] < 2 or area < 4:
                continue
            draw.polygon(list(zip(xs, ys)), fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
            annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                                "category_id": int(rng.choice(category_ids)), "segmentation": [flat],
                                "area": round(area, 2), "bbox": [round(v, 2) for v in bbox], "iscrowd": 0})
        file_name = f"{image_id:012d}.jpg"
        image.save(os.path.join(out_dir, SPLIT, file_name), quality=90)
        images.append({"id": image_id, "file_name": file_name, "width": width, "height": height})
    categories = [{"id": cid, "name": name, "supercategory": sup} for cid, name, sup in COCO_CATEGORIES]
    with open(os.path.join(out_dir, "annotations", f"instances_{SPLIT}.json"), "w") as f:
        json.dump({"images": images, "annotations": annotations, "categories": categories}, f)
    return images, annotations


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    images, annotations = write(args.out_dir, args.images, args.seed)
    sizes = [os.path.getsize(os.path.join(args.out_dir, SPLIT, i["file_name"])) for i in images]
    print(json.dumps({"images": len(images), "objects_per_image": len(annotations) / len(images),
                      "mean_jpeg_kb": sum(sizes) / len(sizes) / 1024}))


if __name__ == "__main__":
    main()

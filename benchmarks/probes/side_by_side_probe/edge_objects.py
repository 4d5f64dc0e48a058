"""What synth-data's COCO lacks and COCO has, added to an annotation file in place: crowd objects (iscrowd=1, RLE on
every second image, a polygon on every third; the last image's objects all made crowd, an image GluonCV's
COCODetection(use_crowd=False) skips) and on every image an object whose box runs to the image's right and bottom
edges (a polygon, not crowd). Needs pycocotools (the image has it)."""

import json

import numpy as np
from pycocotools import mask as mask_utils


def rectangle(x0, y0, x1, y1):
    return [x0, y0, x1, y0, x1, y1, x0, y1]


def add(path):
    """Adds the objects; returns their counts."""
    with open(path, encoding="utf-8") as f:
        coco = json.load(f)
    next_id = max((a["id"] for a in coco["annotations"]), default=0) + 1
    first_category = {}
    for a in coco["annotations"]:
        first_category.setdefault(a["image_id"], a["category_id"])
    added = []
    counts = {"edge": 0, "crowd_rle": 0, "crowd_polygon": 0, "crowd_only_images": 0}
    for k, image in enumerate(coco["images"]):
        w, h = image["width"], image["height"]
        category = first_category.get(image["id"], coco["categories"][0]["id"])
        x0, y0 = round(w * 0.55), round(h * 0.6)
        added.append({"image_id": image["id"], "category_id": category, "iscrowd": 0,
                      "segmentation": [rectangle(x0, y0, w, h)], "bbox": [x0, y0, w - x0, h - y0],
                      "area": float((w - x0) * (h - y0))})
        counts["edge"] += 1
        if k % 2 == 0:
            pixels = np.zeros((h, w), dtype=np.uint8, order="F")
            pixels[h // 10:h // 3, w // 10:w // 2] = 1
            rle = mask_utils.encode(pixels)
            added.append({"image_id": image["id"], "category_id": category, "iscrowd": 1,
                          "segmentation": {"size": rle["size"], "counts": rle["counts"].decode()},
                          "bbox": [float(v) for v in mask_utils.toBbox(rle)], "area": float(mask_utils.area(rle))})
            counts["crowd_rle"] += 1
        if k % 3 == 0:
            x0, y0, x1, y1 = w // 2, h // 10, w * 9 // 10, h // 2
            added.append({"image_id": image["id"], "category_id": category, "iscrowd": 1,
                          "segmentation": [rectangle(x0, y0, x1, y1)], "bbox": [x0, y0, x1 - x0, y1 - y0],
                          "area": float((x1 - x0) * (y1 - y0))})
            counts["crowd_polygon"] += 1
    for a in added:
        a["id"] = next_id
        next_id += 1
    coco["annotations"].extend(added)
    if len(coco["images"]) > 2:
        last = coco["images"][-1]["id"]
        for a in coco["annotations"]:
            if a["image_id"] == last:
                a["iscrowd"] = 1
        counts["crowd_only_images"] = 1
    with open(path, "w", encoding="utf-8") as f:
        json.dump(coco, f)
    return counts

"""COCO's mAP (AP at IoU 0.50:0.95, all areas, 100 detections per image: pycocotools' stats[0]) of detections in
COCO's results format, at full precision, and each category's AP (the same mean over that category alone, as GluonCV's
COCODetectionMetric prints it per class). GluonCV's metrics print them in percent with one decimal: the best
checkpoint, chosen by this number, would then tie between epochs that differ by less than 0.001."""

import contextlib
import io
import json

from mxnet_programs.files import atomic_write


def average_precision(coco, results, iou_type):
    """(stats[0], pycocotools' summary text, {category id: its AP, None without objects}) of `results` (COCO result
    dicts; the file pycocotools loads holds the same) against the ground truth `coco` (a pycocotools COCO). No
    results: 0.0, and 0.0 for every category with objects (pycocotools cannot load none)."""
    from pycocotools.cocoeval import COCOeval

    if not results:
        return 0.0, "no detections", {cid: 0.0 if object_count(coco, cid) else None for cid in coco.getCatIds()}
    # loadRes adds fields to the dicts it is given (id, area): give it copies, the caller's stay as written
    evaluation = COCOeval(coco, coco.loadRes([dict(r) for r in results]), iou_type)
    summary = io.StringIO()
    with contextlib.redirect_stdout(summary):
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    lines = [line for line in summary.getvalue().splitlines() if line.lstrip().startswith("Average ")]
    return float(evaluation.stats[0]), "\n".join(lines), _per_category(evaluation)


def _per_category(evaluation):
    """stats[0]'s mean, one category at a time: precision [IoU threshold, recall, category, area, max detections],
    categories in params.catIds' order (sorted ids), -1 where a category has no objects."""
    params = evaluation.params
    precision = evaluation.eval["precision"][:, :, :, params.areaRngLbl.index("all"),
                                             params.maxDets.index(max(params.maxDets))]
    found = {}
    for k, cid in enumerate(params.catIds):
        valid = precision[:, :, k][precision[:, :, k] > -1]
        found[cid] = float(valid.mean()) if valid.size else None
    return found


def object_count(coco, category_id):
    """The category's objects COCOeval scores: those that are not crowds."""
    return sum(1 for a in coco.loadAnns(coco.getAnnIds(catIds=[category_id])) if not a.get("iscrowd", 0))


def write_results(path, results):
    """The results as pycocotools loads them (a JSON list, compact: 100 detections an image over COCO's 5000
    validation images), replaced whole."""
    atomic_write(path, lambda f: f.write(json.dumps(results).encode()))

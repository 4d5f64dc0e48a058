"""COCO's mAP (AP at IoU 0.50:0.95, all areas, 100 detections per image: pycocotools' stats[0]) of detections in
COCO's results format, at full precision. GluonCV's metrics print it in percent with one decimal: the best
checkpoint, chosen by this number, would then tie between epochs that differ by less than 0.001."""

import contextlib
import io
import json

from mxnet_programs.files import atomic_write


def average_precision(coco, results, iou_type):
    """(stats[0], pycocotools' summary text) of `results` (COCO result dicts; the file pycocotools loads holds the
    same) against the ground truth `coco` (a pycocotools COCO). No results: 0.0 (pycocotools cannot load none)."""
    from pycocotools.cocoeval import COCOeval

    if not results:
        return 0.0, "no detections"
    # loadRes adds fields to the dicts it is given (id, area): give it copies, the caller's stay as written
    evaluation = COCOeval(coco, coco.loadRes([dict(r) for r in results]), iou_type)
    summary = io.StringIO()
    with contextlib.redirect_stdout(summary):
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    lines = [line for line in summary.getvalue().splitlines() if line.lstrip().startswith("Average ")]
    return float(evaluation.stats[0]), "\n".join(lines)


def write_results(path, results):
    """The results as pycocotools loads them (a JSON list, compact: 100 detections an image over COCO's 5000
    validation images), replaced whole."""
    atomic_write(path, lambda f: f.write(json.dumps(results).encode()))

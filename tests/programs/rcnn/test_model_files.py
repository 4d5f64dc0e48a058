"""model_files: what the R-CNN programs leave in the model directory, read from a real run (conftest's source_detector:
Mask R-CNN on classes of its own, ids 10, 7, 4): classes.json in the network's class order with the annotation file's
ids, metrics.json with the best epoch's per-class AP, model.json; and the exported network. Loaded in a fresh process
where GluonCV cannot be imported, with mx.gluon.SymbolBlock.imports (through examples/rcnn_inference.py, the serving
script docs/programs.md shows), the export gives the detections of the trained network (GluonCV's model with the best
epoch's parameters, loaded as model.json says) on the same image to 1e-4, and the example's JSON answer for the image
file is those detections in the image's pixels."""

import json
import re

import numpy as np
import pytest
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK

from programs.rcnn import helpers as h

pytestmark = pytest.mark.usefixtures("needs_mxnet")

MASK_NET = "mask_rcnn_resnet50_v1b_coco"


def test_the_model_dir_holds_the_classes_the_export_and_the_best_epochs_metrics(source_detector):
    job, data = source_detector
    model_dir = job.model_dir
    # synthetic_coco's ids for 3 classes, by hand: 3 (3 - i) + 1
    assert json.loads((model_dir / "classes.json").read_text()) == \
        [{"id": 10, "name": "bolt"}, {"id": 7, "name": "nut"}, {"id": 4, "name": "spring"}]
    info = json.loads((model_dir / "model.json").read_text())
    assert (info["classes"], info["category_ids"], info["model"]) == (h.SOURCE_CLASSES, [10, 7, 4], MASK_NET)
    assert info["best_epoch"] == h.SOURCE_EPOCHS - 1 and "SymbolBlock.imports('model-symbol.json'" in info["load"]
    assert {"model-symbol.json", "model-0000.params", "classes.json", "metrics.json", f"{MASK_NET}-best.params",
            f"{MASK_NET}-final.params"} <= set(info["files"])
    assert f"mask_rcnn: exported the best epoch's network: {model_dir / 'model-0000.params'}" in job.stdout

    metrics = json.loads((model_dir / "metrics.json").read_text())
    best = metrics["best"]
    assert metrics["best_epoch"] == best["epoch"] == h.SOURCE_EPOCHS - 1 and metrics["last"] == best
    val = json.loads((data / "annotations" / "instances_val2017.json").read_text())
    objects = [sum(1 for a in val["annotations"] if a["category_id"] == cid) for cid in (10, 7, 4)]
    assert [(e["class"], e["category_id"], e["val_objects"]) for e in best["class_ap"]] == \
        list(zip(h.SOURCE_CLASSES, [10, 7, 4], objects))
    for iou_type in ("bbox", "segm"):
        # COCO's mAP is the mean of its categories' APs over those with objects: computed here from the classes'
        aps = [e[f"{iou_type}_ap"] for e in best["class_ap"]]
        assert [ap is None for ap in aps] == [n == 0 for n in objects], aps
        assert best[f"val_{iou_type}_map"] == pytest.approx(np.mean([ap for ap in aps if ap is not None]), abs=1e-12)
    # the log's class lines, read by the class metric definitions docs/programs.md gives
    for definition in MASK.class_metric_definitions(h.SOURCE_CLASSES):
        found = re.findall(definition["Regex"], job.stdout)
        _, kind, name = definition["Name"].split(":")
        entry = best["class_ap"][h.SOURCE_CLASSES.index(name)]
        value = entry[kind]
        assert found == ([] if value is None else [f"{value:.4f}"]), (definition, job.stdout[-3000:])


def test_the_exported_network_detects_what_the_trained_network_detects(source_detector, tmp_path):
    job, data = source_detector
    (image,) = (data / "val2017").iterdir()
    h.check_export(job.model_dir, image, tmp_path)

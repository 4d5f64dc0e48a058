"""faster_rcnn: the box model's annotation rule (GluonCV's COCODetection) and its metric lines."""

import re

import faster_rcnn
import mask_rcnn
from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK

ENTRY = {"width": 100, "height": 100}
BOX = {"bbox": [10, 10, 20, 20], "area": 400, "iscrowd": 0, "segmentation": [[10, 10, 30, 10, 30, 30]]}


def test_usable_objects_follow_cocodetection():
    assert FASTER.usable(BOX, ENTRY)
    assert not FASTER.usable(dict(BOX, iscrowd=1), ENTRY)  # as train_faster_rcnn.py's use_crowd=False
    assert not FASTER.usable(dict(BOX, bbox=[10, 10, 1, 20]), ENTRY)  # legacy x2 = x + w - 1
    assert not FASTER.usable(dict(BOX, area=0), ENTRY)


def test_model_names():
    assert FASTER.model_name("resnet50_v1b", False) == "faster_rcnn_resnet50_v1b_coco"
    assert MASK.model_name("resnet101_v1d", True) == "mask_rcnn_fpn_resnet101_v1d_coco"


FASTER_LINES = [
    "epoch=0 iter=5 loss=5.1386 rpn_cls=0.6926 rpn_box=0.0019 rcnn_cls=4.2745 rcnn_box=0.1696 lr=0.000416667 "
    "samples_per_sec=0.216",
    "epoch=0 train_loss=5.2585 samples_per_sec=0.084 epoch_sec=23.82",
    "epoch=0 val_bbox_map=0.0123 val_images=4 val_sec=17.55",
]


def test_metric_definitions_capture_one_number_each():
    for module, extra in ((faster_rcnn, []), (mask_rcnn, ["segm"])):
        names = [d["Name"] for d in module.METRIC_DEFINITIONS]
        assert len(names) == len(set(names))
        for d in module.METRIC_DEFINITIONS:
            assert re.compile(d["Regex"]).groups == 1, d
        assert ("validation:segm_map" in names) == bool(extra)
    found = {d["Name"]: re.search(d["Regex"], "\n".join(FASTER_LINES)) for d in faster_rcnn.METRIC_DEFINITIONS}
    assert {k: float(m.group(1)) for k, m in found.items()} == {
        "train:loss": 5.1386, "train:rpn_cls": 0.6926, "train:rpn_box": 0.0019, "train:rcnn_cls": 4.2745,
        "train:rcnn_box": 0.1696, "train:lr": 0.000416667, "train:samples_per_sec": 0.216,
        "train:epoch_loss": 5.2585, "validation:bbox_map": 0.0123}
    # the lr regex also reads exponent notation
    assert re.search(found and faster_rcnn.METRIC_DEFINITIONS[5]["Regex"],
                     FASTER_LINES[0].replace("0.000416667", "4.2e-05")).group(1) == "4.2e-05"


CLASS_LINES = [
    'epoch=2 class="bolt" val_bbox_ap=0.0456 val_segm_ap=0.0321 val_objects=12',
    'epoch=2 class="traffic light" val_bbox_ap=0.5 val_segm_ap=none val_objects=3',
    'epoch=2 class="traffic" val_bbox_ap=0.25 val_segm_ap=0.125 val_objects=3',
]


def test_class_metric_definitions_capture_each_classs_ap():
    names = ["bolt", "traffic light", "traffic"]
    found = {d["Name"]: [float(m) for m in re.findall(d["Regex"], "\n".join(CLASS_LINES))]
             for d in MASK.class_metric_definitions(names)}
    assert found == {"validation:bbox_ap:bolt": [0.0456], "validation:segm_ap:bolt": [0.0321],
                     "validation:bbox_ap:traffic light": [0.5], "validation:segm_ap:traffic light": [],
                     "validation:bbox_ap:traffic": [0.25], "validation:segm_ap:traffic": [0.125]}
    assert [d["Name"] for d in FASTER.class_metric_definitions(names)] == [f"validation:bbox_ap:{n}" for n in names]


def test_the_entrypoints_publish_their_models_definitions():
    assert faster_rcnn.METRIC_DEFINITIONS == FASTER.metric_definitions()
    assert mask_rcnn.METRIC_DEFINITIONS == MASK.metric_definitions()

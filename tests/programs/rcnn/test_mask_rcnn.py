"""mask_rcnn: what the mask model adds to the box model's input rules (GluonCV's COCOInstance)."""

import pytest
from mxnet_programs.process import ProgramError
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK

ENTRY = {"width": 100, "height": 100}
BOX = {"bbox": [10, 10, 20, 20], "area": 400, "iscrowd": 0, "segmentation": [[10, 10, 30, 10, 30, 30]]}


def test_usable_objects_follow_cocoinstance():
    assert MASK.usable(BOX, ENTRY)
    assert not MASK.usable(dict(BOX, iscrowd=1), ENTRY)
    assert not MASK.usable(dict(BOX, bbox=[150, 10, 20, 20]), ENTRY)  # outside the image
    assert not MASK.usable(dict(BOX, area=1), ENTRY)
    assert not MASK.usable(dict(BOX, segmentation=[[10, 10, 30, 10]]), ENTRY)  # fewer than 3 points


def test_a_non_crowd_object_needs_polygons():
    MASK.check_annotation(BOX, "a.json")
    MASK.check_annotation(dict(BOX, iscrowd=1, segmentation={"counts": "x"}), "a.json")  # crowd RLE: skipped
    with pytest.raises(ProgramError, match="annotation 7 \\(iscrowd=0\\) needs a polygon list 'segmentation'"):
        MASK.check_annotation(dict(BOX, id=7, segmentation={"counts": "x"}), "a.json")


def test_losses_and_main_metric_add_the_mask():
    assert MASK.loss_names[-1] == "mask" and MASK.main_metric == "val_segm_map"
    assert [d["Name"] for d in MASK.metric_definitions()][-1] == "validation:segm_map"

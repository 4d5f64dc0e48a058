"""coco_map: COCO's mAP of known detections, computed by hand: one object, one detection. A box that overlaps
the object with IoU 0.72 matches at the five thresholds 0.50-0.70 and at none of 0.75-0.95: AP 5/10. Each category's AP
the same way, with two categories whose ids are not in the file's order."""

import json

import pytest
from mxnet_programs.rcnn import coco_map

pytestmark = pytest.mark.usefixtures("needs_mxnet")  # pycocotools: in the image

OBJECT = [100.0, 100.0, 100.0, 100.0]  # x, y, w, h


def ground_truth():
    from pycocotools.coco import COCO

    coco = COCO()
    coco.dataset = {"images": [{"id": 1, "width": 400, "height": 400}], "categories": [{"id": 3, "name": "car"}],
                    "annotations": [{"id": 1, "image_id": 1, "category_id": 3, "bbox": OBJECT, "area": 10000.0,
                                     "iscrowd": 0}]}
    coco.createIndex()
    return coco


def detection(bbox, category=3):
    return {"image_id": 1, "category_id": category, "bbox": bbox, "score": 0.9}


def test_an_exact_detection_scores_1_and_the_summary_is_pycocotools():
    ap, summary, _ = coco_map.average_precision(ground_truth(), [detection(OBJECT)], "bbox")
    assert ap == pytest.approx(1.0, abs=1e-12)  # pycocotools: a mean of 1.0s, 0.9999999999999998 here
    lines = summary.splitlines()
    assert len(lines) == 12 and lines[0].startswith(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all"), summary


def test_a_box_of_iou_0_72_matches_at_half_the_thresholds():
    # 85 x 85 at the object's corner: IoU 7225 / 10000 = 0.7225, between 0.70 and 0.75
    ap, _, _ = coco_map.average_precision(ground_truth(), [detection([100.0, 100.0, 85.0, 85.0])], "bbox")
    assert ap == pytest.approx(0.5, abs=1e-12)


def test_the_wrong_class_or_no_detection_scores_0_and_the_results_stay_as_given():
    results = [detection(OBJECT, category=3), detection(OBJECT, category=3)]
    written = json.dumps(results)
    coco_map.average_precision(ground_truth(), results, "bbox")
    assert json.dumps(results) == written  # pycocotools' loadRes adds fields to what it loads: copies
    assert coco_map.average_precision(ground_truth(), [], "bbox") == (0.0, "no detections", {3: 0.0})


def two_categories():
    """An object of category 7 (listed first) and one of category 3; category 5 has none, 9 only a crowd."""
    from pycocotools.coco import COCO

    coco = COCO()
    other = [300.0, 300.0, 50.0, 50.0]
    coco.dataset = {"images": [{"id": 1, "width": 400, "height": 400}],
                    "categories": [{"id": 7, "name": "bolt"}, {"id": 3, "name": "car"}, {"id": 5, "name": "nut"},
                                   {"id": 9, "name": "tug"}],
                    "annotations": [{"id": 1, "image_id": 1, "category_id": 3, "bbox": OBJECT, "area": 10000.0,
                                     "iscrowd": 0},
                                    {"id": 2, "image_id": 1, "category_id": 7, "bbox": other, "area": 2500.0,
                                     "iscrowd": 0},
                                    {"id": 3, "image_id": 1, "category_id": 9, "bbox": other, "area": 2500.0,
                                     "iscrowd": 1}]}
    coco.createIndex()
    return coco, other


def test_each_category_scores_its_own_ap_and_the_map_is_their_mean():
    coco, other = two_categories()
    # category 7 found exactly (AP 1), category 3 at IoU 0.7225 (AP 5/10): mAP 0.75 over the categories with objects
    results = [detection(other, category=7), detection([100.0, 100.0, 85.0, 85.0], category=3)]
    ap, _, per_category = coco_map.average_precision(coco, results, "bbox")
    assert ap == pytest.approx(0.75, abs=1e-12)
    assert per_category.keys() == {3, 5, 7, 9}
    assert per_category[7] == pytest.approx(1.0, abs=1e-12) and per_category[3] == pytest.approx(0.5, abs=1e-12)
    assert per_category[5] is None and per_category[9] is None  # no objects; a crowd is not scored
    assert [coco_map.object_count(coco, cid) for cid in (7, 3, 5, 9)] == [1, 1, 0, 0]
    _, _, nothing = coco_map.average_precision(coco, [], "bbox")
    assert nothing == {7: 0.0, 3: 0.0, 5: None, 9: None}


def test_results_are_written_as_pycocotools_loads_them(tmp_path):
    path = tmp_path / "val_results.json"
    coco_map.write_results(path, [detection(OBJECT)])
    assert ground_truth().loadRes(str(path)).getAnnIds() == [1]

"""synthetic_coco (the image's `synth-data coco`): the tiny COCO data set the R-CNN tests train on, with COCO's 80
categories or classes of your own."""

import argparse
import json
import subprocess
import sys

import pytest
from sagemaker_mxnet_data import synthetic_coco
from sagemaker_mxnet_data.coco_categories import COCO_CLASS_NAMES

from programs.rcnn import helpers as h


def test_synthetic_coco_layout_and_annotations(tmp_path, needs_mxnet):
    written = synthetic_coco.write_coco(tmp_path / "c", num_train=5, num_val=3, image_size=(128, 200), seed=7)
    assert set(written) == {"train2017", "val2017"}
    from PIL import Image

    for split, count in (("train2017", 5), ("val2017", 3)):
        data = json.loads((tmp_path / "c" / "annotations" / f"instances_{split}.json").read_text())
        assert len(data["images"]) == count
        assert [(c["id"], c["name"]) for c in data["categories"]] == \
            [(cid, name) for cid, name, _ in synthetic_coco.COCO_CATEGORIES]
        assert [c["name"] for c in data["categories"]] == COCO_CLASS_NAMES
        images = {img["id"]: img for img in data["images"]}
        for img in data["images"]:
            with Image.open(tmp_path / "c" / split / img["file_name"]) as im:
                assert im.size == (img["width"], img["height"])
                assert 128 <= max(im.size) <= 200 and min(im.size) >= 128
            assert img["coco_url"].split("/")[-2:] == [split, img["file_name"]]
        assert data["annotations"]
        for ann in data["annotations"]:
            img = images[ann["image_id"]]
            assert ann["iscrowd"] == 0 and ann["category_id"] in (1, 3, 18)
            (poly,) = ann["segmentation"]
            xs, ys = poly[0::2], poly[1::2]
            assert len(poly) >= 6
            x, y, w, hgt = ann["bbox"]
            assert x == pytest.approx(min(xs), abs=0.02) and y == pytest.approx(min(ys), abs=0.02)
            assert x + w == pytest.approx(max(xs), abs=0.05) and y + hgt == pytest.approx(max(ys), abs=0.05)
            assert 0 <= x and x + w <= img["width"] and 0 <= y and y + hgt <= img["height"]
            assert 0 < ann["area"] <= w * hgt + 0.1


# The shapes a class of your own is drawn as, by its position in the list, and their polygons' vertex counts.
VERTICES = {"rectangle": 4, "ellipse": 24, "triangle": 3, "diamond": 4, "pentagon": 5}


def test_synthetic_coco_writes_classes_of_your_own(tmp_path, needs_mxnet):
    classes = ["bolt", "nut", "washer"]
    synthetic_coco.write_coco(tmp_path / "c", num_train=6, num_val=2, image_size=(128, 160), seed=2, classes=classes)
    # ids 3 (K - i) + 1, by hand: neither 1..K nor increasing in the file's order
    expected = [{"id": 10, "name": "bolt", "supercategory": "synthetic"},
                {"id": 7, "name": "nut", "supercategory": "synthetic"},
                {"id": 4, "name": "washer", "supercategory": "synthetic"}]
    vertices = {10: VERTICES["rectangle"], 7: VERTICES["ellipse"], 4: VERTICES["triangle"]}
    seen = set()
    for split in ("train2017", "val2017"):
        data = json.loads((tmp_path / "c" / "annotations" / f"instances_{split}.json").read_text())
        assert data["categories"] == expected
        for ann in data["annotations"]:
            (poly,) = ann["segmentation"]
            assert len(poly) == 2 * vertices[ann["category_id"]], ann  # the class decides the shape
            seen.add(ann["category_id"])
    assert seen == {10, 7, 4}


def test_synthetic_coco_is_deterministic(tmp_path, needs_mxnet):
    synthetic_coco.write_coco(tmp_path / "a", 2, 1, 160, seed=3)
    synthetic_coco.write_coco(tmp_path / "b", 2, 1, 160, seed=3)
    for rel in ("annotations/instances_train2017.json", "train2017/000000000001.jpg", "val2017/000000100001.jpg"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()


def test_synthetic_coco_cli_and_subcommand(tmp_path, needs_mxnet):
    out = subprocess.run([sys.executable, "-m", "sagemaker_mxnet_data.synthetic_coco", str(tmp_path / "c"),
                          "--train", "2", "--val", "1", "--image-size", "128"],
                         cwd=h.CONTAINER_SRC, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "c" / "annotations" / "instances_val2017.json").is_file()
    # The hook the synth-data CLI uses.
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    synthetic_coco.add_subcommand(sub)
    args = parser.parse_args(["coco", str(tmp_path / "d"), "--train", "1", "--val", "0", "--image-size", "96,128",
                              "--classes", "1"])
    assert args.func(args) == 0
    data = json.loads((tmp_path / "d" / "annotations" / "instances_train2017.json").read_text())
    assert [(c["id"], c["name"]) for c in data["categories"]] == [(4, "class-1")]  # K = 1: id 3 x 1 + 1
    assert {a["category_id"] for a in data["annotations"]} == {4}
    assert not (tmp_path / "d" / "annotations" / "instances_val2017.json").exists()
    names = parser.parse_args(["coco", str(tmp_path / "e"), "--classes", " big ship,tug "]).classes
    assert names == ["big ship", "tug"]
    for bad in ("0", "a,,b", "a,a"):
        with pytest.raises(SystemExit):
            parser.parse_args(["coco", str(tmp_path / "e"), "--classes", bad])
    bad = subprocess.run([sys.executable, "-m", "sagemaker_mxnet_data.synthetic_coco", str(tmp_path / "e"),
                          "--image-size", "8"], cwd=h.CONTAINER_SRC, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "image size" in bad.stderr


def test_gluoncv_reads_synthetic_coco_with_its_own_loader(coco):
    """The coco_url trick: stock GluonCV 0.10 (which derives paths from coco_url) reads the data too."""
    from gluoncv.data import COCOInstance

    ds = COCOInstance(root=str(coco), splits=["instances_val2017"], skip_empty=False)
    assert len(ds) == 2
    img, label, segm = ds[0]
    assert img.shape[2] == 3 and label.shape[1] == 5 and len(segm) == len(label)

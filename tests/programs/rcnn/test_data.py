"""data: every rank's batches of an epoch, its validation shard, and the train set without crowd objects."""

import json

import pytest
from mxnet_programs.rcnn import data, inputs
from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK

from programs.rcnn import helpers as h
from programs.rcnn.test_inputs import TWO_BY_TWO, _args, _config

np = pytest.importorskip("numpy", reason="needs numpy: run inside the image (make image-tests)")


def test_epoch_batches_are_disjoint_equal_and_deterministic():
    ratios = np.linspace(0.5, 2.0, 23)
    steps = data.steps_per_epoch(23, 3, 2)
    assert steps == 3
    shards = [data.epoch_batches(np, 23, ratios, 5, 1, r, 3, 2, steps) for r in range(3)]
    seen = [i for shard in shards for batch in shard for i in batch]
    assert all(len(shard) == steps and all(len(b) == 2 for b in shard) for shard in shards)
    assert len(seen) == len(set(seen)) == 18
    assert shards[0] == data.epoch_batches(np, 23, ratios, 5, 1, 0, 3, 2, steps)
    assert shards[0] != data.epoch_batches(np, 23, ratios, 5, 2, 0, 3, 2, steps)
    assert data.steps_per_epoch(23, 3, 2, cap=2) == 2
    assert data.steps_per_epoch(3, 2, 2) == 0


def test_val_shards_cover_everything_once():
    for n in (0, 1, 2, 5, 9):
        for size in (1, 2, 3):
            shards = [data.val_shard(n, r, size) for r in range(size)]
            assert [i for s, e in shards for i in range(s, e)] == list(range(n))


def test_two_ranks_of_a_host_train_on_disjoint_halves_of_its_sharded_part(coco):
    train, val = inputs.load_inputs(FASTER, _args(coco))
    shards = [inputs.train_shard(_args(coco), env, None, _config(train="ShardedByS3Key")) for env in TWO_BY_TWO[:2]]
    ratios = [1.0] * train.num_images
    steps = data.steps_per_epoch(train.num_images, shards[0].count, 1)
    assert steps == 4
    per_rank = [{i for batch in data.epoch_batches(np, train.num_images, ratios, 233, 0, s.index, s.count, 1, steps)
                 for i in batch} for s in shards]
    assert per_rank[0].isdisjoint(per_rank[1]) and per_rank[0] | per_rank[1] == set(range(8))




# ---- crowd objects: neither model trains on them

CROWD_IMAGE, MIXED_IMAGE = 2, 1  # the coco fixture's image 2 has 2 objects, image 1 has 3 (synthetic_coco, seed 1)


def _with_crowds(coco, tmp_path):
    """The coco fixture with image 2's objects all crowds (one as COCO's RLE, one as a polygon), image 1's first
    object a crowd polygon and the val file's first object a crowd: {train image id: the boxes [x, y, w, h] of its
    non-crowd objects}, the train crowd boxes, the train annotation count."""
    data = h.copy_coco(coco, tmp_path / "crowds")

    def mark(d):
        sizes = {image["id"]: (image["height"], image["width"]) for image in d["images"]}
        first = {}
        for ann in d["annotations"]:
            first.setdefault(ann["image_id"], ann)
            if ann["image_id"] == CROWD_IMAGE or ann is first[MIXED_IMAGE]:
                ann["iscrowd"] = 1
        rle = next(a for a in d["annotations"] if a["image_id"] == CROWD_IMAGE)
        height, width = sizes[CROWD_IMAGE]
        rle["segmentation"] = {"size": [height, width], "counts": [width * 10, width * 5, width * (height - 15)]}
    h.edit_annotations(data, "train2017", mark)
    h.edit_annotations(data, "val2017", lambda d: d["annotations"][0].update(iscrowd=1))
    anns = json.loads((data / "annotations" / "instances_train2017.json").read_text())["annotations"]
    kept = {}
    for ann in anns:
        kept.setdefault(ann["image_id"], [])
        if not ann["iscrowd"]:
            kept[ann["image_id"]].append(ann["bbox"])
    crowds = [ann["bbox"] for ann in anns if ann["iscrowd"]]
    assert len(crowds) == 3 and kept[CROWD_IMAGE] == [] and len(kept[MIXED_IMAGE]) == 2
    return data, {image: boxes for image, boxes in kept.items() if boxes}, crowds, len(anns)


@pytest.mark.parametrize("model", [FASTER, MASK], ids=["faster", "mask"])
def test_crowd_objects_never_train_and_an_image_of_crowds_alone_is_skipped(coco, tmp_path, model):
    """As GluonCV's COCOInstance and train_faster_rcnn.py's COCODetection(use_crowd=False): the usable count of the
    start log, the train set's images and each image's ground-truth boxes (what the transform hands the target
    generators), by hand from the file."""
    from gluoncv import data as gdata

    channel, kept, crowds, num_anns = _with_crowds(coco, tmp_path)
    train, val = inputs.load_inputs(model, _args(channel))
    assert train.usable_images == 7
    assert f"(8 images, 7 with usable objects, {num_anns} annotations)" in train.describe()
    train_ds, val_ds = data.make_datasets(model, train, val, gdata)
    assert len(train_ds) == 7
    # validation: pycocotools scores against the whole file, crowds included (COCOeval's own crowd rule)
    assert [a["iscrowd"] for a in val_ds.coco.dataset["annotations"]][0] == 1
    inclusive = 1.0 if model is FASTER else 0.0  # COCODetection's x2 = x + w - 1, COCOInstance's x2 = x + w

    def corners(boxes):
        return np.array(sorted((x, y, x + w - inclusive, y + h - inclusive) for x, y, w, h in boxes))
    for index, image_id in enumerate(sorted(kept)):
        found = np.array(sorted(tuple(row[:4]) for row in np.asarray(train_ds[index][1], dtype=np.float64)))
        assert found.shape == (len(kept[image_id]), 4) and np.allclose(found, corners(kept[image_id]), atol=1e-3), \
            (image_id, found)
        for crowd in corners(crowds):
            assert not np.isclose(found, crowd, atol=1e-3).all(axis=1).any(), (image_id, crowd)

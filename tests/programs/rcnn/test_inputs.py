"""inputs: COCO-layout channels found and checked before MXNet (in-process, standard library only); any categories,
the same in the train and val files."""

import shutil
from argparse import Namespace

import pytest
from mxnet_programs.process import ProgramError
from mxnet_programs.rcnn import inputs
from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK
from mxnet_programs.sagemaker_env import DistEnv
from sagemaker_mxnet_data.coco_categories import COCO_CLASS_NAMES

from programs.rcnn import helpers as h


def _args(train_dir, val_dir=None, **kw):
    args = Namespace(train_dir=str(train_dir), val_dir=str(val_dir or "/nonexistent"), train_channel="train",
                     val_dir_explicit=val_dir is not None, train_split=None, val_split=None)
    vars(args).update(kw)
    return args


def test_load_inputs_autodetects_splits(coco):
    train, val = inputs.load_inputs(MASK, _args(coco))
    assert (train.split, val.split) == ("train2017", "val2017")
    assert train.num_images == 8 and train.usable_images == 8 and val.num_images == 2


def test_load_inputs_uses_the_val_channel(coco, tmp_path):
    val_dir = h.copy_coco(coco, tmp_path / "val")
    (val_dir / "annotations" / "instances_train2017.json").unlink()
    train, val = inputs.load_inputs(FASTER, _args(coco, val_dir))
    assert val.directory == str(val_dir) and val.split == "val2017"


@pytest.mark.parametrize("breakage, message", [
    ("no_annotations", "missing annotation file"),
    ("missing_image", "image referenced but absent"),
    ("no_categories", "no categories in"),
    ("category_without_name", "category without an integer id and a name"),
    ("duplicate_category_id", "duplicate category ids in .*: 6$"),
    ("duplicate_category_name", "duplicate category names in .*: 'car'$"),
    ("empty", "empty train set"),
    ("rle", "polygon"),
])
def test_load_inputs_rejects_bad_data(coco, tmp_path, breakage, message):
    data = h.copy_coco(coco, tmp_path / "data")
    if breakage == "no_annotations":
        for f in (data / "annotations").iterdir():
            f.unlink()
    elif breakage == "missing_image":
        (data / "train2017" / "000000000003.jpg").unlink()
    elif breakage == "no_categories":
        h.edit_annotations(data, "train2017", lambda d: d.__setitem__("categories", []))
    elif breakage == "category_without_name":
        h.edit_annotations(data, "train2017", lambda d: d["categories"].__setitem__(5, {"id": 6}))
    elif breakage == "duplicate_category_id":
        h.edit_annotations(data, "train2017", lambda d: d["categories"].__setitem__(4, {"id": 6, "name": "widget"}))
    elif breakage == "duplicate_category_name":
        h.edit_annotations(data, "train2017", lambda d: d["categories"].__setitem__(5, {"id": 6, "name": "car"}))
    elif breakage == "empty":
        h.edit_annotations(data, "train2017", lambda d: d.__setitem__("annotations", []))
    elif breakage == "rle":
        h.edit_annotations(data, "train2017", lambda d: d["annotations"][0].__setitem__(
            "segmentation", {"size": [10, 10], "counts": "abc"}))
    with pytest.raises(ProgramError, match=message) as info:
        inputs.load_inputs(MASK, _args(data))
    assert str(data) in str(info.value)


def test_any_categories_are_the_classes_in_the_train_files_order(coco, own_classes):
    train, val = inputs.load_inputs(MASK, _args(own_classes))
    assert train.categories == [(10, "bolt"), (7, "nut"), (4, "washer")]  # synthetic_coco's ids, by hand
    assert train.class_names == ["bolt", "nut", "washer"] and train.category_ids == [10, 7, 4]
    assert train.usable_images == 8 and val.categories == train.categories
    assert inputs.describe_classes(train) == ("3 classes, the train annotation file's categories in its order: "
                                              "'bolt' (id 10), 'nut' (id 7), 'washer' (id 4)")
    coco_train, _ = inputs.load_inputs(MASK, _args(coco))
    assert coco_train.class_names == COCO_CLASS_NAMES
    assert inputs.describe_classes(coco_train).startswith("80 classes, COCO's 80 categories in COCO's order: ")


def test_one_category_is_enough(own_classes, tmp_path):
    data = h.copy_coco(own_classes, tmp_path / "data")

    def keep_bolts(d):
        d["categories"] = d["categories"][:1]
        d["annotations"] = [a for a in d["annotations"] if a["category_id"] == 10]
    for split in ("train2017", "val2017"):
        h.edit_annotations(data, split, keep_bolts)
    train, val = inputs.load_inputs(FASTER, _args(data))
    assert train.categories == val.categories == [(10, "bolt")] and train.usable_images > 0


def test_val_categories_in_another_order_are_the_same_classes(own_classes, tmp_path):
    data = h.copy_coco(own_classes, tmp_path / "data")
    h.edit_annotations(data, "val2017", lambda d: d["categories"].reverse())
    train, val = inputs.load_inputs(FASTER, _args(data))
    assert train.class_names == ["bolt", "nut", "washer"] and val.class_names == ["washer", "nut", "bolt"]


@pytest.mark.parametrize("change, only_train, only_val", [
    (lambda d: d["categories"][1].update(name="nuts"), "'nut' (id 7)", "'nuts' (id 7)"),  # renamed
    (lambda d: d["categories"][2].update(id=5), "'washer' (id 4)", "'washer' (id 5)"),  # renumbered
    (lambda d: d["categories"].pop(), "'washer' (id 4)", "none"),  # one fewer
])
def test_val_categories_that_disagree_are_refused_naming_both_files(own_classes, tmp_path, change, only_train,
                                                                      only_val):
    data = h.copy_coco(own_classes, tmp_path / "data")
    h.edit_annotations(data, "val2017", lambda d: (change(d), d.__setitem__("annotations", [])))
    with pytest.raises(ProgramError, match="^the train and val annotation files list different categories") as info:
        inputs.load_inputs(FASTER, _args(data))
    message = str(info.value)
    for needle in (str(data / "annotations" / "instances_train2017.json"),
                   str(data / "annotations" / "instances_val2017.json"),
                   f"only in train: {only_train}; only in val: {only_val}:"):
        assert needle in message, message


def test_data_channel_trains_on_train2017_and_validates_on_val2017(coco):
    train, val = inputs.load_inputs(MASK, _args(coco, train_channel="data"))
    assert (train.split, val.split) == ("train2017", "val2017")
    assert train.image_dir == str(coco / "train2017") and val.image_dir == str(coco / "val2017")
    assert (train.num_images, val.num_images) == (8, 2)


def test_data_channel_with_a_val_channel_validates_on_the_val_channel(coco, tmp_path):
    data = h.copy_coco(coco, tmp_path / "data")
    shutil.rmtree(data / "val2017")  # not needed: the val channel validates
    val_dir = h.copy_coco(coco, tmp_path / "val")
    train, val = inputs.load_inputs(FASTER, _args(data, val_dir, train_channel="data"))
    assert train.directory == str(data) and val.directory == str(val_dir) and val.split == "val2017"


@pytest.mark.parametrize("missing", ["annotations/instances_train2017.json", "train2017",
                                     "annotations/instances_val2017.json", "val2017"])
def test_incomplete_data_channel_names_the_channel_and_the_missing_path(coco, tmp_path, missing):
    data = h.copy_coco(coco, tmp_path / "data")
    target = data / missing
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(ProgramError, match=r"^channel 'data' is incomplete: missing ") as info:
        inputs.load_inputs(FASTER, _args(data, train_channel="data"))
    assert str(target) in str(info.value)


def _config(**distributions):
    return {name: {"TrainingInputMode": "File", "S3DistributionType": d} for name, d in distributions.items()}


TWO_BY_TWO = [DistEnv(rank=r, size=4, local_rank=r % 2, local_size=2) for r in range(4)]


def test_sharded_train_channel_is_split_by_local_rank(coco):
    args = _args(coco)
    shards = [inputs.train_shard(args, env, None, _config(train="ShardedByS3Key")) for env in TWO_BY_TWO]
    assert [(s.index, s.count, s.per_host) for s in shards] == [(0, 2, True), (1, 2, True)] * 2
    shards = [inputs.train_shard(args, env, None, _config(train="FullyReplicated")) for env in TWO_BY_TWO]
    assert [(s.index, s.count, s.per_host) for s in shards] == [(r, 4, False) for r in range(4)]


@pytest.mark.parametrize("channel, fix", [
    ("train", "give it as a FullyReplicated 'val' channel"),  # a val* split next to the train split
    ("data", "give it as a FullyReplicated 'val' channel"),  # val2017 of the data channel
    ("val", "make it FullyReplicated"),
])
def test_validation_data_from_a_sharded_channel_is_refused(coco, channel, fix):
    _, val = inputs.load_inputs(FASTER, _args(coco))
    args = _args(coco, coco) if channel == "val" else _args(coco, train_channel=channel)
    config = _config(**{channel: "ShardedByS3Key"})
    with pytest.raises(ProgramError, match=f"channel '{channel}', which is ShardedByS3Key") as info:
        inputs.train_shard(args, TWO_BY_TWO[0], val, config)
    assert fix in str(info.value)
    assert inputs.train_shard(args, TWO_BY_TWO[1], None, config) is not None  # no validation data: fine

"""Fast tests of the R-CNN pieces that need no training: synthetic COCO, input checks, schedules, sampling,
metric regexes, hyperparameter parsing."""

import argparse
import json
import re
import shutil
import subprocess
import sys
from argparse import Namespace

import faster_rcnn
import mask_rcnn
import pytest
import rcnn_common as rc
import rcnn_helpers as h
import sm_common as smc

np = pytest.importorskip("numpy")
synthetic_coco = h.synthetic_coco


# ---------------------------------------------------------------------------------------------
# synthetic COCO


def test_synthetic_coco_layout_and_annotations(tmp_path, needs_mxnet):
    written = synthetic_coco.write_coco(tmp_path / "c", num_train=5, num_val=3, image_size=(128, 200), seed=7)
    assert set(written) == {"train2017", "val2017"}
    from PIL import Image

    for split, count in (("train2017", 5), ("val2017", 3)):
        data = json.loads((tmp_path / "c" / "annotations" / f"instances_{split}.json").read_text())
        assert len(data["images"]) == count
        assert [(c["id"], c["name"]) for c in data["categories"]] == \
            [(cid, name) for cid, name, _ in synthetic_coco.COCO_CATEGORIES]
        assert [c["name"] for c in data["categories"]] == rc.COCO_CLASSES
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


def test_synthetic_coco_is_deterministic(tmp_path, needs_mxnet):
    synthetic_coco.write_coco(tmp_path / "a", 2, 1, 160, seed=3)
    synthetic_coco.write_coco(tmp_path / "b", 2, 1, 160, seed=3)
    for rel in ("annotations/instances_train2017.json", "train2017/000000000001.jpg", "val2017/000000100001.jpg"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()


def test_synthetic_coco_cli_and_subcommand(tmp_path, needs_mxnet):
    out = subprocess.run([sys.executable, "-m", "sagemaker_mxnet_horovod.synthetic_coco", str(tmp_path / "c"),
                          "--train", "2", "--val", "1", "--image-size", "128"],
                         cwd=h.CONTAINER_SRC, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "c" / "annotations" / "instances_val2017.json").is_file()
    # The hook the synth-data CLI uses.
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    synthetic_coco.add_subcommand(sub)
    args = parser.parse_args(["coco", str(tmp_path / "d"), "--train", "1", "--val", "0", "--image-size", "96,128"])
    assert args.func(args) == 0
    assert (tmp_path / "d" / "annotations" / "instances_train2017.json").is_file()
    assert not (tmp_path / "d" / "annotations" / "instances_val2017.json").exists()
    bad = subprocess.run([sys.executable, "-m", "sagemaker_mxnet_horovod.synthetic_coco", str(tmp_path / "e"),
                          "--image-size", "8"], cwd=h.CONTAINER_SRC, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "image size" in bad.stderr


def test_gluoncv_reads_synthetic_coco_with_its_own_loader(coco):
    """The coco_url trick: stock GluonCV 0.10 (which derives paths from coco_url) reads the data too."""
    from gluoncv.data import COCOInstance

    ds = COCOInstance(root=str(coco), splits=["instances_val2017"], skip_empty=False)
    assert len(ds) == 2
    img, label, segm = ds[0]
    assert img.shape[2] == 3 and label.shape[1] == 5 and len(segm) == len(label)


# ---------------------------------------------------------------------------------------------
# input checks (in-process, standard library only)


def _args(train_dir, val_dir=None, **kw):
    args = Namespace(train_dir=str(train_dir), val_dir=str(val_dir or "/nonexistent"), train_channel="train",
                     val_dir_explicit=val_dir is not None, train_split=None, val_split=None)
    vars(args).update(kw)
    return args


def test_load_inputs_autodetects_splits(coco):
    train, val = rc.load_inputs(_args(coco), rc.MASK_RCNN)
    assert (train.split, val.split) == ("train2017", "val2017")
    assert train.num_images == 8 and train.usable_images == 8 and val.num_images == 2


def test_load_inputs_uses_the_val_channel(coco, tmp_path):
    val_dir = h.copy_coco(coco, tmp_path / "val")
    (val_dir / "annotations" / "instances_train2017.json").unlink()
    train, val = rc.load_inputs(_args(coco, val_dir), rc.FASTER_RCNN)
    assert val.directory == str(val_dir) and val.split == "val2017"


@pytest.mark.parametrize("breakage, message", [
    ("no_annotations", "missing annotation file"),
    ("missing_image", "image referenced but absent"),
    ("categories", "not COCO's 80 categories"),
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
    elif breakage == "categories":
        h.edit_annotations(data, "train2017", lambda d: d["categories"].__setitem__(5, {"id": 6, "name": "widget"}))
    elif breakage == "empty":
        h.edit_annotations(data, "train2017", lambda d: d.__setitem__("annotations", []))
    elif breakage == "rle":
        h.edit_annotations(data, "train2017", lambda d: d["annotations"][0].__setitem__(
            "segmentation", {"size": [10, 10], "counts": "abc"}))
    with pytest.raises(smc.EntrypointError, match=message) as info:
        rc.load_inputs(_args(data), rc.MASK_RCNN)
    assert str(data) in str(info.value)


def test_usable_objects_follow_gluoncv_rules():
    entry = {"width": 100, "height": 100}
    box = {"bbox": [10, 10, 20, 20], "area": 400, "iscrowd": 0, "segmentation": [[10, 10, 30, 10, 30, 30]]}
    assert rc._usable(box, entry, masks=False) and rc._usable(box, entry, masks=True)
    crowd = dict(box, iscrowd=1)
    assert rc._usable(crowd, entry, masks=False) and not rc._usable(crowd, entry, masks=True)
    assert not rc._usable(dict(box, bbox=[10, 10, 1, 20]), entry, masks=False)  # legacy x2 = x + w - 1
    assert not rc._usable(dict(box, area=0), entry, masks=False)
    assert not rc._usable(dict(box, bbox=[150, 10, 20, 20]), entry, masks=True)  # outside the image


def test_horovod_false_rejects_several_hosts():
    args = Namespace(horovod=False)
    with pytest.raises(smc.EntrypointError, match="this job spans 2 hosts"):
        rc.check_distribution(args, smc.DistEnv(), {"SM_HOSTS": '["algo-1", "algo-2"]'})
    with pytest.raises(smc.EntrypointError, match="2 ranks were launched"):
        rc.check_distribution(args, smc.DistEnv(0, 2, 0, 2), {})
    rc.check_distribution(args, smc.DistEnv(), {"SM_HOSTS": '["algo-1"]'})
    rc.check_distribution(Namespace(horovod=True), smc.DistEnv(), {"SM_HOSTS": '["algo-1", "algo-2"]'})


def test_horovod_false_counts_the_hosts_of_its_own_job_in_a_heterogeneous_cluster():
    args = Namespace(horovod=False)
    hosts = '["algo-1", "algo-2", "algo-3"]'
    # algo-3 is outside the distribution groups: it runs alone.
    outside = {"SM_HOSTS": hosts, "SM_CURRENT_HOST": "algo-3",
               "SM_TRAINING_ENV": '{"distribution_hosts": ["algo-1", "algo-2"]}'}
    rc.check_distribution(args, smc.DistEnv(), outside)
    with pytest.raises(smc.EntrypointError, match="this job spans 2 hosts \\(algo-1, algo-2\\)"):
        rc.check_distribution(args, smc.DistEnv(), {**outside, "SM_CURRENT_HOST": "algo-1"})
    solo = {"SM_HOSTS": hosts, "SM_CURRENT_HOST": "algo-3", "SM_TRAINING_ENV": '{"distribution_hosts": ["algo-3"]}'}
    rc.check_distribution(args, smc.DistEnv(), solo)


# ---------------------------------------------------------------------------------------------
# schedules and sampling


def _lr_args(**kw):
    base = dict(lr_decay=0.1, lr_decay_epoch=[2, 3], lr_warmup=10, lr_warmup_factor=1.0 / 3.0)
    base.update(kw)
    return Namespace(**base)


def test_learning_rate_warmup_and_decay():
    args = _lr_args()
    assert rc.learning_rate(args, 0.01, 0, 0, 100) == pytest.approx(0.01 / 3)
    assert rc.learning_rate(args, 0.01, 0, 5, 100) == pytest.approx(0.01 * (1 / 3 * 0.5 + 0.5))
    assert rc.learning_rate(args, 0.01, 0, 10, 100) == pytest.approx(0.01)
    assert rc.learning_rate(args, 0.01, 1, 0, 100) == pytest.approx(0.01)
    assert rc.learning_rate(args, 0.01, 2, 0, 100) == pytest.approx(0.001)
    assert rc.learning_rate(args, 0.01, 3, 50, 100) == pytest.approx(0.0001)
    # warmup counts global iterations: epoch 1 iteration 2 of 4-iteration epochs = iteration 6
    assert rc.learning_rate(args, 0.01, 1, 2, 4) == pytest.approx(0.01 * (1 / 3 * 0.4 + 0.6))
    assert rc.learning_rate(_lr_args(lr_warmup=0), 0.01, 0, 0, 4) == pytest.approx(0.01)


def test_epoch_batches_are_disjoint_equal_and_deterministic():
    ratios = np.linspace(0.5, 2.0, 23)
    steps = rc.steps_per_epoch(23, 3, 2)
    assert steps == 3
    shards = [rc.epoch_batches(np, 23, ratios, 5, 1, r, 3, 2, steps) for r in range(3)]
    seen = [i for shard in shards for batch in shard for i in batch]
    assert all(len(shard) == steps and all(len(b) == 2 for b in shard) for shard in shards)
    assert len(seen) == len(set(seen)) == 18
    assert shards[0] == rc.epoch_batches(np, 23, ratios, 5, 1, 0, 3, 2, steps)
    assert shards[0] != rc.epoch_batches(np, 23, ratios, 5, 2, 0, 3, 2, steps)
    assert rc.steps_per_epoch(23, 3, 2, cap=2) == 2
    assert rc.steps_per_epoch(3, 2, 2) == 0


def test_val_shards_cover_everything_once():
    for n in (0, 1, 2, 5, 9):
        for size in (1, 2, 3):
            shards = [rc.val_shard(n, r, size) for r in range(size)]
            assert [i for s, e in shards for i in range(s, e)] == list(range(n))


# ---------------------------------------------------------------------------------------------
# the walkthrough's single `data` channel (COCO's own layout)


def _channels(tmp_path, **dirs):
    env = {"SM_INPUT_DIR": str(tmp_path / "input"), "SM_CHANNELS": json.dumps(sorted(dirs))}
    env.update({f"SM_CHANNEL_{name.upper()}": str(path) for name, path in dirs.items()})
    return env


def test_train_source_prefers_the_flag_then_train_then_data(tmp_path):
    assert rc.train_source(None, _channels(tmp_path, data="/d")) == ("data", "/d")
    assert rc.train_source(None, _channels(tmp_path, train="/t", val="/v")) == ("train", "/t")
    assert rc.train_source("/flag", _channels(tmp_path, data="/d")) == ("train", "/flag")
    assert rc.train_source(None, _channels(tmp_path)) == ("train", str(tmp_path / "input" / "data" / "train"))


def test_train_and_data_channels_together_are_refused(tmp_path):
    with pytest.raises(smc.EntrypointError, match=r"both a 'train' and a 'data' channel were given"):
        rc.train_source(None, _channels(tmp_path, train="/t", data="/d"))


def test_data_channel_trains_on_train2017_and_validates_on_val2017(coco):
    train, val = rc.load_inputs(_args(coco, train_channel="data"), rc.MASK_RCNN)
    assert (train.split, val.split) == ("train2017", "val2017")
    assert train.image_dir == str(coco / "train2017") and val.image_dir == str(coco / "val2017")
    assert (train.num_images, val.num_images) == (8, 2)


def test_data_channel_with_a_val_channel_validates_on_the_val_channel(coco, tmp_path):
    data = h.copy_coco(coco, tmp_path / "data")
    shutil.rmtree(data / "val2017")  # not needed: the val channel validates
    val_dir = h.copy_coco(coco, tmp_path / "val")
    train, val = rc.load_inputs(_args(data, val_dir, train_channel="data"), rc.FASTER_RCNN)
    assert train.directory == str(data) and val.directory == str(val_dir) and val.split == "val2017"


@pytest.mark.parametrize("missing", ["annotations/instances_train2017.json", "train2017",
                                     "annotations/instances_val2017.json", "val2017"])
def test_incomplete_data_channel_names_the_channel_and_the_missing_path(coco, tmp_path, missing):
    data = h.copy_coco(coco, tmp_path / "data")
    target = data / missing
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(smc.EntrypointError, match=r"^channel 'data' is incomplete: missing ") as info:
        rc.load_inputs(_args(data, train_channel="data"), rc.FASTER_RCNN)
    assert str(target) in str(info.value)


# ---------------------------------------------------------------------------------------------
# ShardedByS3Key training data: split by local rank within a host


def _config(**distributions):
    return {name: {"TrainingInputMode": "File", "S3DistributionType": d} for name, d in distributions.items()}


TWO_BY_TWO = [smc.DistEnv(rank=r, size=4, local_rank=r % 2, local_size=2) for r in range(4)]


def test_sharded_train_channel_is_split_by_local_rank(coco):
    args = _args(coco)
    shards = [rc.train_shard(args, env, None, _config(train="ShardedByS3Key")) for env in TWO_BY_TWO]
    assert [(s.index, s.count, s.per_host) for s in shards] == [(0, 2, True), (1, 2, True)] * 2
    shards = [rc.train_shard(args, env, None, _config(train="FullyReplicated")) for env in TWO_BY_TWO]
    assert [(s.index, s.count, s.per_host) for s in shards] == [(r, 4, False) for r in range(4)]


def test_two_ranks_of_a_host_train_on_disjoint_halves_of_its_sharded_part(coco):
    train, val = rc.load_inputs(_args(coco), rc.FASTER_RCNN)
    shards = [rc.train_shard(_args(coco), env, None, _config(train="ShardedByS3Key")) for env in TWO_BY_TWO[:2]]
    ratios = [1.0] * train.num_images
    steps = rc.steps_per_epoch(train.num_images, shards[0].count, 1)
    assert steps == 4
    per_rank = [{i for batch in rc.epoch_batches(np, train.num_images, ratios, 233, 0, s.index, s.count, 1, steps)
                 for i in batch} for s in shards]
    assert per_rank[0].isdisjoint(per_rank[1]) and per_rank[0] | per_rank[1] == set(range(8))


@pytest.mark.parametrize("channel, fix", [
    ("train", "give it as a FullyReplicated 'val' channel"),  # a val* split next to the train split
    ("data", "give it as a FullyReplicated 'val' channel"),  # val2017 of the data channel
    ("val", "make it FullyReplicated"),
])
def test_validation_data_from_a_sharded_channel_is_refused(coco, channel, fix):
    _, val = rc.load_inputs(_args(coco), rc.FASTER_RCNN)
    args = _args(coco, coco) if channel == "val" else _args(coco, train_channel=channel)
    config = _config(**{channel: "ShardedByS3Key"})
    with pytest.raises(smc.EntrypointError, match=f"channel '{channel}', which is ShardedByS3Key") as info:
        rc.train_shard(args, TWO_BY_TWO[0], val, config)
    assert fix in str(info.value)
    assert rc.train_shard(args, TWO_BY_TWO[1], None, config) is not None  # no validation data: fine


# ---------------------------------------------------------------------------------------------
# metric regexes and hyperparameters


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


def test_hyperparameters_parse_like_sagemaker_sends_them():
    parser = rc.build_parser(rc.FASTER_RCNN, "x")
    args = parser.parse_args(["--batch_size", "2", "--use_fpn", "True", "--pretrained-base", "0",
                              "--lr-decay-epoch", "8,4", "--short", "640,800", "--sagemaker_program", "x.py"])
    assert (args.batch_size, args.use_fpn, args.pretrained_base) == (2, True, False)
    assert args.lr_decay_epoch == [4, 8] and args.short == (640, 800)
    defaults = parser.parse_args([])
    assert (defaults.horovod, defaults.pretrained_base, defaults.amp, defaults.lr_decay_epoch) == \
        (True, True, False, [17, 23])


def test_list_hyperparameters_as_the_toolkit_passes_json_lists():
    # hyperparameters {"lr-decay-epoch": [8, 4], "short": [640, 800]}: the toolkit passes Python's str() of each.
    args = rc.build_parser(rc.FASTER_RCNN, "x").parse_args(["--lr-decay-epoch", "[8, 4]", "--short", "[640, 800]",
                                                           "--use-fpn", "True"])
    assert args.lr_decay_epoch == [4, 8] and args.short == (640, 800) and args.use_fpn is True


def test_bad_boolean_names_key_and_value(tmp_path):
    out = subprocess.run([sys.executable, str(h.SCRIPTS["faster"]), "--use-fpn", "maybe"],
                         capture_output=True, text=True, timeout=60, env=h.base_env(tmp_path))
    assert out.returncode == 2
    assert "--use-fpn" in out.stderr and "'maybe'" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_help_lists_hyperparameters_with_defaults():
    out = subprocess.run([sys.executable, str(h.SCRIPTS["mask"]), "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    text = re.sub(r"\s+", " ", out.stdout)
    for flag, default in (("--epochs", "26"), ("--batch-size", "1"), ("--lr", "0.01"), ("--amp", "False"),
                          ("--val-interval", "1"), ("--num-workers", "4"), ("--network", "resnet50_v1b"),
                          ("--use-fpn", "False"), ("--short", "800"), ("--max-size", "1333"),
                          ("--pretrained-base", "True"), ("--lr-warmup", "1000"), ("--lr-decay-epoch", "17,23"),
                          ("--lr-decay", "0.1"), ("--wd", "0.0001"), ("--momentum", "0.9"), ("--seed", "233"),
                          ("--log-interval", "100"), ("--horovod", "True"), ("--max-iterations-per-epoch", "0"),
                          ("--save-interval", "1")):
        assert re.search(re.escape(flag) + r" \S+ .*?\(default: " + re.escape(default) + r"\)", text), flag
    for flag in ("--checkpoint-dir", "--model-dir", "--lr-warmup-factor"):
        assert flag in text

"""finetune: an earlier detector's weights, found before MXNet (this image's model output, its model.tar.gz, a GluonCV
params file, the `model` channel) and applied by GluonCV's reset_class rule. End to end: Mask R-CNN fine-tuned from a
detector trained briefly on other classes (conftest's source_detector, standing in for a COCO-trained one) starts
from the source's weights, with the source's rows for the classes both name exactly where GluonCV's own reset_class
puts them, and its first iterations lose less than the same run from scratch (same data, same seed).

The two runs of the fine-tuning set (2 images of 128 px, one iteration an epoch, 3 epochs) run side by side, one
thread each."""

import json
import shutil
import tarfile

import pytest
from mxnet_programs.process import ProgramError
from mxnet_programs.rcnn import finetune
from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK
from sagemaker_mxnet_data import synthetic_coco
from sagemaker_mxnet_data.coco_categories import COCO_CLASS_NAMES

from programs.helpers import mxnet_blocked_env, recorded_first_step
from programs.rcnn import helpers as h
from programs.rcnn.helpers import SMALL, SOURCE_CLASSES, TARGET_CLASSES, run_small

MASK_NET = "mask_rcnn_resnet50_v1b_coco"

# ---- finding the weights (standard library)


def model_output(directory, tags=("best", "final"), classes=SOURCE_CLASSES):
    """A stand-in for this image's model dir: model.json, the params files (empty: nothing reads them here)."""
    directory.mkdir(parents=True)
    (directory / "model.json").write_text(json.dumps({"model": MASK_NET, "classes": classes}))
    for tag in tags:
        (directory / f"{MASK_NET}-{tag}.params").write_bytes(b"")
    (directory / "model-0000.params").write_bytes(b"")
    return directory


def test_this_images_model_output_gives_its_best_params_and_its_classes(tmp_path):
    out = model_output(tmp_path / "model")
    source = finetune.find_source(str(out), MASK_NET)
    assert (source.params, source.classes, source.model) == (str(out / f"{MASK_NET}-best.params"),
                                                              tuple(SOURCE_CLASSES), MASK_NET)
    without_best = model_output(tmp_path / "final", tags=("final",))
    assert finetune.find_source(str(without_best), MASK_NET).params == str(without_best / f"{MASK_NET}-final.params")
    assert finetune.find_source(str(out / f"{MASK_NET}-final.params"), MASK_NET).classes == tuple(SOURCE_CLASSES)


def test_the_sdks_model_channel_holds_model_tar_gz_as_uploaded(tmp_path):
    out = model_output(tmp_path / "model")
    channel = tmp_path / "channel"
    channel.mkdir()
    with tarfile.open(channel / "model.tar.gz", "w:gz") as tar:  # as SageMaker packs /opt/ml/model
        for path in out.iterdir():
            tar.add(path, arcname=path.name)
    source = finetune.find_source(str(channel), MASK_NET, extract_dir=str(tmp_path / "unpacked"))
    assert source.params == str(tmp_path / "unpacked" / f"{MASK_NET}-best.params")
    assert source.classes == tuple(SOURCE_CLASSES) and source.given == str(channel)
    assert (tmp_path / "unpacked" / "model.json").is_file()


def test_a_gluoncv_params_file_has_cocos_classes_unless_a_classes_file_lies_beside_it(tmp_path):
    zoo = tmp_path / "faster_rcnn_resnet50_v1b_coco-447328d8.params"  # GluonCV's model store's name
    zoo.write_bytes(b"")
    source = finetune.find_source(str(zoo), "faster_rcnn_resnet50_v1b_coco")
    assert (source.classes, source.model) == (None, "faster_rcnn_resnet50_v1b_coco")  # COCO's 80 if 80 rows
    with pytest.raises(ProgramError, match="are a faster_rcnn_resnet50_v1b_coco, but this job trains a mask_rcnn"):
        finetune.find_source(str(zoo), MASK_NET)
    (tmp_path / "classes.json").write_text(json.dumps([{"id": 5, "name": "ship"}, {"id": 2, "name": "tug"}]))
    assert finetune.find_source(str(tmp_path), "faster_rcnn_resnet50_v1b_coco").classes == ("ship", "tug")
    (tmp_path / "classes.json").write_text(json.dumps(["ship", "ship"]))
    with pytest.raises(ProgramError, match="does not list unique class names"):
        finetune.find_source(str(zoo), "faster_rcnn_resnet50_v1b_coco")


@pytest.mark.parametrize("layout, message", [
    ("nothing", "fine-tuning weights not found: .* does not exist"),
    ("empty_dir", "fine-tuning weights not found: no .params file in"),
    ("only_exported", "model-0000.params is an exported network"),
    ("two_params", "cannot tell which fine-tuning weights to use in .*: a.params, b.params"),
    ("not_params", "must be a .params file, a directory or a model.tar.gz"),
    ("no_params_beside_model_json", "has model.json but neither"),
])
def test_unusable_weights_are_refused_naming_them(tmp_path, layout, message):
    given = tmp_path / "weights"
    if layout != "nothing":
        given.mkdir()
    if layout == "only_exported":
        (given / "model-0000.params").write_bytes(b"")
    elif layout == "two_params":
        (given / "a.params").write_bytes(b"")
        (given / "b.params").write_bytes(b"")
    elif layout == "not_params":
        given.rmdir()
        given.write_text("{}")
    elif layout == "no_params_beside_model_json":
        shutil.rmtree(given)
        model_output(given, tags=())
    with pytest.raises(ProgramError, match=message) as info:
        finetune.find_source(str(given), MASK_NET)
    assert str(given) in str(info.value)


def test_the_classes_both_name_are_reused_wherever_they_stand():
    # by hand: washer is new; bolt is source class 2, nut source class 0; spring is dropped
    assert finetune.reuse_map(["washer", "bolt", "nut"], ["nut", "spring", "bolt"]) == {1: 2, 2: 0}
    assert finetune.reuse_map(["a"], ["b"]) == {}
    assert finetune.reuse_map(COCO_CLASS_NAMES[:2], COCO_CLASS_NAMES) == {0: 0, 1: 1}


# ---- the programs: bad weights stop the job at start


@pytest.mark.parametrize("how", ["flag", "channel"])
def test_missing_weights_stop_the_job_before_mxnet(coco, tmp_path, how):
    missing = tmp_path / "no-such-model"
    env = h.channel_env(coco)
    args = [*h.TINY_ARGS, "--finetune-from", str(missing)] if how == "flag" else h.TINY_ARGS
    if how == "channel":
        env.update(SM_CHANNEL_MODEL=str(missing), SM_CHANNELS=json.dumps(["model", "train"]))
    job = h.run("faster", tmp_path / "job", args, env=mxnet_blocked_env(tmp_path / "job", env), timeout=120)
    h.assert_usage_error(job, "faster_rcnn", "fine-tuning weights not found", str(missing))


def test_weights_of_another_architecture_are_refused_naming_them(source_detector, tmp_path):
    """Mask R-CNN's weights (its classes beside them) for Faster R-CNN's network, as the programs build it from the
    model zoo: a ProgramError (exit 2, before the first step: RcnnTraining applies them as it starts)."""
    import mxnet as mx
    from gluoncv import model_zoo

    job, _ = source_detector
    weights = tmp_path / "weights"
    weights.mkdir()
    shutil.copy(job.model_dir / f"{MASK_NET}-best.params", weights / "detector.params")
    shutil.copy(job.model_dir / "classes.json", weights / "classes.json")
    source = finetune.find_source(str(weights), "faster_rcnn_resnet50_v1b_coco")  # no model.json: no name to compare
    net = model_zoo.get_model("faster_rcnn_resnet50_v1b_coco", pretrained=False, pretrained_base=False)
    net.initialize()
    net.reset_class(TARGET_CLASSES)
    with pytest.raises(ProgramError, match="are not of this job's architecture: they hold 4 parameters the network "
                                           "lacks \\(e.g. 'mask.deconv.bias'\\)") as info:
        finetune.start_from(mx, net, source, TARGET_CLASSES, FASTER.class_rows)
    assert str(weights / "detector.params") in str(info.value)


# ---- end to end: fine-tuned and from scratch, side by side


@pytest.fixture(scope="module")
def finetuned(source_detector, module_tmp):
    """(fine-tuned job, from-scratch job) on 2 images of TARGET_CLASSES: 3 iterations each, the same seed."""
    source, _ = source_detector
    root = module_tmp("finetune")
    data = root / "coco"
    synthetic_coco.write_coco(data, num_train=2, num_val=0, image_size=(SMALL, SMALL), seed=22, classes=TARGET_CLASSES)
    args = ["--epochs", "3"]
    jobs = [run_small(root / "finetuned", data, [*args, "--finetune-from", str(source.model_dir)], start_only=True),
            run_small(root / "scratch", data, args, start_only=True)]
    return tuple(job.wait(900) for job in jobs)


def class_parameters(model_dir):
    """{save_parameters path: array} of the class-specific trainable weights the run started from."""
    start, _ = recorded_first_step(model_dir)
    paths = json.loads((model_dir / "parameter-paths.json").read_text())
    return {paths[name]: start[name] for name in start.files}


def reused_rows(new, old, size):
    """{new row block: old row block} of the blocks of `size` rows that `new` took from `old` (a fresh block, random,
    equals no old one)."""
    blocks = lambda a: [a[i:i + size] for i in range(0, len(a), size)]  # noqa: E731
    return {i: j for i, block in enumerate(blocks(new)) for j, other in enumerate(blocks(old))
            if (block == other).all()}


def test_the_fine_tuned_network_starts_from_the_source_by_gluoncvs_rule(finetuned, source_detector):
    import mxnet as mx
    from gluoncv import model_zoo

    job, scratch = finetuned
    assert job.returncode == 0 and scratch.returncode == 0, job.explain() + scratch.explain()
    source_job, _ = source_detector
    source_file = source_job.model_dir / f"{MASK_NET}-best.params"
    assert (f"mask_rcnn: fine-tuning from {source_file}, classes from its model.json (3 classes): every weight but "
            "the class rows comes from it; classes reused with the background row: 'bolt', 'nut'; classes that start "
            "fresh: 'washer'") in job.stdout, job.stdout
    source = {name: value.asnumpy() for name, value in mx.nd.load(str(source_file)).items()}
    started = class_parameters(job.model_dir)
    class_names = {name for name in started if name.startswith(tuple(f"{p}." for p in MASK.class_rows))}
    assert len(class_names) == 6, sorted(started)  # class, box and mask predictors, weight and bias
    for name in set(started) - class_names:
        assert (started[name] == source[name]).all(), name
    # By hand: bolt and nut are rows 0 and 1 in both lists, the class predictor's background row leads, 4 box rows
    # a class; washer (new) takes no source row.
    expected = {"class_predictor": {0: 0, 1: 1, 2: 2}, "box_predictor": {0: 0, 1: 1}, "mask.mask": {0: 0, 1: 1}}
    sizes = {"class_predictor": 1, "box_predictor": 4, "mask.mask": 1}
    ours = {name: reused_rows(started[name], source[name], sizes[name.rsplit(".", 1)[0]]) for name in class_names}
    assert ours == {name: expected[name.rsplit(".", 1)[0]] for name in class_names}, ours
    # GluonCV's own reset_class on the source (its classes, then the job's, reusing the names both hold)
    net = model_zoo.get_model(MASK_NET, pretrained=False, pretrained_base=False)
    net.initialize()
    net.reset_class(SOURCE_CLASSES)
    net.load_parameters(str(source_file), ignore_extra=True)
    net.reset_class(TARGET_CLASSES, reuse_weights=[c for c in TARGET_CLASSES if c in SOURCE_CLASSES])
    gluoncv = {name: p.data().asnumpy() for name, p in net._collect_params_with_prefix().items()}
    for name in class_names:
        size = sizes[name.rsplit(".", 1)[0]]
        assert reused_rows(gluoncv[name], source[name], size) == ours[name], name
        for new in ours[name]:
            assert (gluoncv[name][new * size:(new + 1) * size] == started[name][new * size:(new + 1) * size]).all()


def test_fine_tuned_first_iterations_lose_less_than_from_scratch(finetuned):
    job, scratch = finetuned
    assert job.returncode == 0 and scratch.returncode == 0, job.explain() + scratch.explain()
    tuned = [values for values, _ in h.first_iterations(job, MASK.loss_names)]
    fresh = [values for values, _ in h.first_iterations(scratch, MASK.loss_names)]
    assert len(tuned) == len(fresh) == 3, job.stdout + scratch.stdout
    for what, losses in (("fine-tuned", tuned), ("from scratch", fresh)):
        print(f"{what}:", "; ".join(" ".join(f"{k}={v:.3f}" for k, v in values.items()) for values in losses))
    assert all(a["loss"] < b["loss"] for a, b in zip(tuned, fresh)), (tuned, fresh)

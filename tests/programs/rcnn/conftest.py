"""Fixtures for the R-CNN program tests; the helpers live in helpers.py."""

import pytest
from sagemaker_mxnet_data import synthetic_coco

from programs.rcnn import helpers as rcnn_helpers


def pytest_configure(config):
    config.addinivalue_line("markers", "mpi: runs several ranks under mpirun (needs horovod + OpenMPI)")
    config.addinivalue_line("markers", "slow: takes more than 30 seconds")


@pytest.fixture(scope="session")
def needs_mxnet():
    problem = rcnn_helpers.dev_venv_problem()
    if problem:
        pytest.skip(problem)


@pytest.fixture(scope="session")
def needs_horovod():
    problem = rcnn_helpers.horovod_problem()
    if problem:
        pytest.skip(problem)


@pytest.fixture(scope="session")
def coco(tmp_path_factory, needs_mxnet):
    """8 train + 2 val synthetic images, 200-320 px (train2017 + val2017 in one dir)."""
    out = tmp_path_factory.mktemp("coco") / "coco"
    synthetic_coco.write_coco(out, num_train=8, num_val=2, image_size=(200, 320), seed=1)
    return out


@pytest.fixture(scope="session")
def first_epoch(coco, tmp_path_factory):
    """first_epoch(model) -> the finished job: one process of `model` ("faster" or "mask") trained for 1 epoch of 2
    iterations on the coco fixture's data and validated, with a SageMaker Debugger hook configuration saving weights,
    gradients and losses every step into debugger/tensors beside its workdir. Run once per model, on first use, for
    test_training.py (its outputs, then a resume in the same dirs) and test_training_debugger.py (the tensors): one
    run where there were two, each a process start, MXNet's import and two ResNet-50 iterations). At the wiring tests'
    cheap settings (helpers.py's WIRING_ARGS and SMALL_MODEL, through recorded_run.py)."""
    from programs.test_debugger import WEIGHTS_AND_LOSSES, hook_env

    jobs = {}

    def run(model):
        if model not in jobs:
            root = tmp_path_factory.mktemp(f"first-epoch-{model}")
            env = {**rcnn_helpers.channel_env(coco), **hook_env(root / "debugger", WEIGHTS_AND_LOSSES)}
            args = [*rcnn_helpers.WIRING_ARGS, "--max-iterations-per-epoch", "2", "--epochs", "1"]
            jobs[model] = rcnn_helpers.run_cheap(model, root / "job", args, env=env, timeout=900)
        return jobs[model]

    return run


OWN_CLASSES = ["bolt", "nut", "washer"]  # synthetic_coco gives them ids 10, 7, 4


@pytest.fixture(scope="session")
def own_classes(tmp_path_factory, needs_mxnet):
    """The coco fixture's images with classes of one's own: OWN_CLASSES, ids 10, 7, 4 in the files' order."""
    out = tmp_path_factory.mktemp("own") / "coco"
    synthetic_coco.write_coco(out, num_train=8, num_val=2, image_size=(200, 320), seed=1, classes=OWN_CLASSES)
    return out


@pytest.fixture(scope="session")
def source_detector(tmp_path_factory, needs_mxnet):
    """(the finished job, its data): Mask R-CNN trained for 8 iterations on 4 SMALL-pixel images of SOURCE_CLASSES
    (helpers.py), validated once at the end (1 image), so its best epoch is exported. It stands in for a COCO-trained
    detector in test_finetune.py and is the exported network of test_model_files.py."""
    h = rcnn_helpers
    root = tmp_path_factory.mktemp("source")
    data = root / "coco"
    synthetic_coco.write_coco(data, num_train=4, num_val=1, image_size=(h.SMALL, h.SMALL), seed=21,
                              classes=h.SOURCE_CLASSES)
    epochs = str(h.SOURCE_EPOCHS)
    job = h.run_small(root / "job", data, ["--epochs", epochs, "--val-interval", epochs])
    assert job.returncode == 0, job.explain()
    return job, data

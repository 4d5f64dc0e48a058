"""SDK local mode through the real SageMaker Python SDK: examples/sdk_v2_estimator.py (Estimator) and
examples/sdk_v3_model_trainer.py (ModelTrainer, Mode.LOCAL_CONTAINER), 2 CPU hosts, the built-in MNIST.

What each generation does (see docs/local-mode.md):
  v2: compose services algo-N-<5 random chars>, `command: train`, resourceconfig network_interface_name eth0.
  v3: services algo-N, no command (the image's CMD `train` runs), network_interface_name "ethwe", which does
      not exist in a compose network: the launcher falls back to the default route's interface.
Both mount one /opt/ml/model into every host, feed every channel as File, and report the exit code of the
first container to exit (compose --abort-on-container-exit), so the test inspects every container itself.
"""

from __future__ import annotations

import json
import re
import tarfile

import pytest
from sdk_support import example_module

EPOCHS = 2
MODEL_FILES = {"model-symbol.json", "model-0000.params", "metrics.json"}
EPOCH_LINE = re.compile(r"epoch=(\d+) train_loss=\S+ train_accuracy=\S+ val_accuracy=([0-9.]+) samples_per_sec=")
# What the launcher's start log shows under each generation: host names, the cluster interface and why.
HOST_LOG = {
    "v2": [re.compile(r"train: current host: algo-1-[a-z0-9]{5}  master: algo-1-[a-z0-9]{5}"),
           re.compile(r"train: interface: eth0")],
    "v3": [re.compile(r"train: current host: algo-1  master: algo-1\b"),
           re.compile(r"train: note: network_interface_name 'ethwe' does not exist here; using 'eth0'")],
}


@pytest.mark.parametrize("generation", ["v2", "v3"])
def test_two_hosts_train_mnist(run_example, generation):
    run = run_example(generation, "--epochs", str(EPOCHS))
    assert run.returncode == 0, run.describe()
    assert [c.exit_code for c in run.containers] == [0, 0], run.describe()
    for pattern in HOST_LOG[generation]:
        assert pattern.search(run.log), f"{pattern.pattern!r} not in the log\n{run.describe()}"

    # The model, exported once by rank 0 into the model dir every host shares.
    assert run.model_artifacts and run.model_artifacts.name == "model.tar.gz", run.describe()
    with tarfile.open(run.model_artifacts) as model:
        assert MODEL_FILES <= set(model.getnames()), model.getnames()
        metrics = json.load(model.extractfile("metrics.json"))
    with tarfile.open(run.model_artifacts.with_name("output.tar.gz")) as output:
        assert any(name.startswith("tensorboard/events.out.tfevents.") for name in output.getnames()), \
            output.getnames()
        # As AWS's MXNet image tests expect after a successful job (the toolkit writes it too).
        assert "success" in output.getnames(), output.getnames()

    # One accuracy line per epoch, as reported by rank 0, agreeing with the exported metrics.
    epochs = [(int(m.group(1)), float(m.group(2))) for m in EPOCH_LINE.finditer(run.log)]
    assert [epoch for epoch, _ in epochs] == list(range(1, EPOCHS + 1)), run.describe()
    assert epochs[-1][1] == pytest.approx(metrics["val_accuracy"], abs=1e-4)
    assert metrics["val_accuracy"] >= 0.5, metrics  # chance is 0.1
    # The example's metric_definitions find every metric in what SageMaker would read.
    for definition in example_module(generation).METRIC_DEFINITIONS:
        found = re.findall(definition["Regex"], run.log)
        assert len(found) == EPOCHS, (definition, found)


@pytest.mark.parametrize("generation", ["v2", "v3"])
def test_failed_job_raises_in_the_sdk(run_example, generation, tmp_path):
    """A rank's bad-input error ends the job on every host; whichever container exits first carries that
    status to compose, so the SDK raises."""
    empty = tmp_path / "empty-train"
    empty.mkdir()
    run = run_example(generation, "--epochs", "1", train=empty)
    assert run.returncode not in (0, None), run.describe()
    assert [c.exit_code for c in run.containers] == [2, 2], run.describe()
    assert "mnist: error: channel 'train' is empty: no files in /opt/ml/input/data/train" in run.log, run.describe()
    assert run.seconds < 120, run.describe()  # fails fast: a generous bound (docs/local-mode.md: 9-12 s)

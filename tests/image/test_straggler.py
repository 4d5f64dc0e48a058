"""sagemaker_mxnet_straggler with the image's Horovod and MXNet: the .pth arms the recorder when SMMH_STRAGGLER_REPORT
names a directory, once; gradient compression's wrap and this one compose, in either order; one process writes no
report. The recorder, the report and the chart at work, across hosts: tests/integration/test_straggler_cluster.py."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Looked up, not imported: importing horovod.mxnet in pytest's process breaks later PIL JPEG writes
# (test_gradient_compression.py says why).
if importlib.util.find_spec("horovod") is None:
    pytest.skip("needs the image's Horovod: run inside the image (make image-tests)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "container" / "src"  # this tree's package: the .pth imports it
SLOW_RANK = ROOT / "tests" / "integration" / "code" / "slow_rank.py"
VARIABLES = ("SMMH_STRAGGLER_REPORT", "HOROVOD_GRADIENT_COMPRESSION")


def environment(**env):
    environ = {key: value for key, value in os.environ.items() if not key.startswith("OMPI_") and key not in VARIABLES}
    environ.update({"PYTHONPATH": str(SOURCE), "OMP_NUM_THREADS": "1", **env})
    return environ


def python(code, **env):
    done = subprocess.run([sys.executable, "-c", code], env=environment(**env), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


WRAPS = """
import os, sys
from sagemaker_mxnet_compression import hook as compression
from sagemaker_mxnet_straggler import hook as straggler
os.environ.update(HOROVOD_GRADIENT_COMPRESSION="fp16", SMMH_STRAGGLER_REPORT="/tmp/straggler")
first, second = (compression, straggler) if sys.argv[1] == "compression-first" else (straggler, compression)
first.install()
if sys.argv[2] == "imported-between":
    import horovod.mxnet
second.install()
import horovod.mxnet as hvd, mxnet as mx
hvd.init()
net = mx.gluon.nn.Dense(2, in_units=3)
net.initialize()
trainer = hvd.DistributedTrainer(net.collect_params(), "sgd")
wrapped = hvd.DistributedTrainer._allreduce_grads
print(type(trainer._compression).__name__ if not isinstance(trainer._compression, type) else
      trainer._compression.__name__, hasattr(wrapped, "__wrapped__"), hasattr(wrapped.__wrapped__, "__wrapped__"))
"""


@pytest.mark.parametrize(("order", "when"), [("compression-first", "imported-after"),
                                             ("straggler-first", "imported-between")])
def test_gradient_compression_and_the_recorder_wrap_the_trainer_together_in_either_order(order, when):
    done = subprocess.run([sys.executable, "-c", WRAPS, order, when], env=environment(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["FP16Compressor", "True", "False"]  # both: compressed, timed once


ARMED = """
import sys, horovod.mxnet as hvd
wrapped = hvd.DistributedTrainer._allreduce_grads
print(hasattr(wrapped, "__wrapped__"), hasattr(getattr(wrapped, "__wrapped__", None), "__wrapped__"))
"""


def test_the_pth_arms_the_recorder_once_and_only_when_a_directory_is_named():
    # Debian's Python runs a venv's .pth files twice: still one wrap.
    assert python(ARMED, SMMH_STRAGGLER_REPORT="/tmp/straggler").split() == ["True", "False"]
    assert python(ARMED).split() == ["False", "False"]
    assert python(ARMED, SMMH_STRAGGLER_REPORT="off").split() == ["False", "False"]


def test_one_process_has_no_other_rank_to_wait_for_and_writes_nothing(tmp_path):
    report_dir = tmp_path / "straggler"
    done = subprocess.run([sys.executable, str(SLOW_RANK), "--steps", "40", "--hidden", "16"], capture_output=True,
                          text=True, timeout=120, env=environment(SMMH_STRAGGLER_REPORT=str(report_dir),
                                                                  SM_MODEL_DIR=str(tmp_path)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert not report_dir.exists() and "straggler report" not in done.stderr

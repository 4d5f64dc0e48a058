"""sagemaker_mxnet_straggler with the image's Horovod and MXNet: the .pth arms the recorder when SMMH_STRAGGLER_REPORT
names a directory, once; gradient compression's wrap and this one compose, in either order; one process writes no
report. The recorder, the report and the chart at work, across hosts: tests/integration/test_straggler_cluster.py."""

import importlib.util
import json
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


def test_on_short_steps_the_ranks_agree_to_time_a_step_about_every_so_many_seconds(tmp_path):
    """2 ranks under mpirun, steps of milliseconds, a step timed about every 0.3 s (the launcher's
    horovod_straggler_every_s) on rank 0 and every 3 s on rank 1 (its own environment, which must not matter): the
    ranks meet at the same steps (the job ends: a rank meeting alone would stall it), at least 10 steps apart, each
    spacing 0.3 s of the steps rank 0 measured before it, here by the script's clock."""
    report_dir, every_s = tmp_path / "straggler", 0.3
    rank = [sys.executable, str(SLOW_RANK), "--steps", "1000", "--hidden", "16"]
    done = subprocess.run(
        ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "1", *rank,
         ":", "-np", "1", "env", "SMMH_STRAGGLER_EVERY_S=3", *rank],
        capture_output=True, text=True, timeout=300,
        env=environment(SMMH_STRAGGLER_REPORT=str(report_dir), SMMH_STRAGGLER_EVERY_S=str(every_s),
                        SM_MODEL_DIR=str(tmp_path)))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((report_dir / "report.json").read_text())
    steps, spanned = report["samples"]["step"], report["samples"]["spanned"]
    assert report["steps"]["timed_every_s"] == every_s and len(steps) >= 6, report["steps"]
    # Each sample stands for the steps since the one before (the first, since the 20th): the spacing every rank used.
    met = [20, *steps]
    assert spanned == [b - a for a, b in zip(met, met[1:])]
    # The last meeting's figures would have come at the next: it is after the last sample.
    assert report["steps"]["last_met"] > steps[-1]
    # The first two meetings come 10 steps apart (no step time yet). After, the spacing set at a meeting comes from the
    # step time rank 0 sent there: that of the two meetings before. The same step time by the script's clock (rank
    # 0's arrivals: trainer step S is the script's step S - 1), and every_s of it, at least 10 steps.
    assert spanned[:2] == [10, 10]
    ready = json.loads((tmp_path / "rank-0.json").read_text())["ready_s"]
    expected = [max(10, every_s / ((ready[b - 1] - ready[a - 1]) / (b - a))) for a, b in zip(met, met[1:])]
    for index in range(2, len(spanned)):
        assert spanned[index] == pytest.approx(expected[index - 2], rel=0.2, abs=1), (index, spanned, expected)
    assert max(spanned) > 10, spanned  # the steps are short: the spacing grew

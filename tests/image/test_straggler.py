"""sagemaker_mxnet_straggler with the image's Horovod, MXNet and matplotlib: the .pth arms the recorder when
SMMH_STRAGGLER_REPORT names a directory; a user's Gluon script (tests/integration/code/slow_rank.py, no code for the
report) run as 3 ranks under mpirun in this container names the rank made slow, by the delay it measured itself, and
rank 0 writes the report the chart is drawn from. Gradient compression's wrap and this one compose, in either order.
Across hosts: tests/integration/test_straggler_cluster.py."""

import importlib.util
import json
import os
import statistics
import struct
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
MPIRUN_FLAGS = ["--allow-run-as-root", "--oversubscribe", "-mca", "mpi_yield_when_idle", "1"]
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


def test_three_ranks_one_sleeping_each_step_name_it_by_the_delay_it_measured_and_the_chart_is_drawn(tmp_path):
    """Rank 2 sleeps 0.05 s before each step; fp16 gradient compression is on too (its wrap and this one compose)."""
    report_dir = tmp_path / "straggler"
    env = environment(SMMH_STRAGGLER_REPORT=str(report_dir), HOROVOD_GRADIENT_COMPRESSION="fp16",
                      SM_MODEL_DIR=str(tmp_path))
    argv = ["mpirun", *MPIRUN_FLAGS, "-np", "3", "-x", "PYTHONPATH", "-x", "SMMH_STRAGGLER_REPORT", "-x",
            "HOROVOD_GRADIENT_COMPRESSION", "-x", "SM_MODEL_DIR", "-x", "OMP_NUM_THREADS", sys.executable,
            str(SLOW_RANK), "--slow-rank", "2", "--extra-s", "0.05", "--steps", "240", "--hidden", "64"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "compresses gradients to fp16" in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("straggler report: ")]
    # Rank 0's one line: the job so far, once 20 steps were timed (one in 10 after the 20th).
    assert len(lines) == 1 and lines[0].startswith("straggler report: steps 30-220: rank 2 on "), lines

    report = json.loads((report_dir / "report.json").read_text())
    slept = statistics.median(json.loads((tmp_path / "rank-2.json").read_text())["slept_s"])
    assert report["verdict"]["stands_out"] and report["verdict"]["ranks"] == [2]
    assert report["ranks"][2]["median_lateness_s"] == pytest.approx(slept, rel=0.2)
    # Written at exit: every sample rank 0 received (the last one, at step 240, is read at a next one that never is).
    assert report["steps"] == {"first_timed": 30, "last_timed": 230, "timed_every": 10, "start_steps_not_timed": 20,
                               "samples": 21, "samples_kept": 21}
    assert [row["steps"] for row in report["ranks"]] == [210] * 3  # 21 samples of 10 steps each
    assert report["ranks"][2]["waited_on_others_s"] < report["ranks"][0]["waited_on_others_s"]

    chart = tmp_path / "lateness.png"
    drawn = subprocess.run([sys.executable, "-m", "sagemaker_mxnet_straggler.chart", str(report_dir / "report.json"),
                            str(chart)], env=environment(), capture_output=True, text=True, timeout=120)
    assert drawn.returncode == 0, drawn.stderr
    png = chart.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1000, 700)


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

"""sagemaker_mxnet_compression with the image's Horovod: the launcher's HOROVOD_GRADIENT_COMPRESSION makes
hvd.DistributedTrainer compress gradients where the script does not choose (the image's .pth arms the hook), and a
script's own compression= always wins. One process (Horovod of size 1): what each trainer holds is what its
allreduces would use; tests/integration/test_mnist_cluster.py sees float16 on the wire across 2 hosts."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Looked up, not imported: importing horovod.mxnet in pytest's process puts libmxnet.so's libjpeg (API 80) in the
# global symbol scope (Horovod loads its library RTLD_GLOBAL) and every later PIL JPEG write in the run fails.
if importlib.util.find_spec("horovod") is None:
    pytest.skip("needs the image's Horovod: run inside the image (make image-tests)", allow_module_level=True)

SOURCE = Path(__file__).resolve().parents[2] / "container" / "src"  # this tree's package: the .pth imports it
TRAINERS = """
import horovod.mxnet as hvd, mxnet as mx
hvd.init()
net = mx.gluon.nn.Dense(2, in_units=3)
net.initialize()
params = net.collect_params()
def kind(trainer):
    return type(trainer._compression).__name__ if not isinstance(trainer._compression, type) else trainer._compression.__name__
print("default", kind(hvd.DistributedTrainer(params, "sgd")))
print("again", kind(hvd.DistributedTrainer(params, "sgd", {"learning_rate": 0.1})))
print("keyword", kind(hvd.DistributedTrainer(params, "sgd", compression=hvd.Compression.none)))
print("positional", kind(hvd.DistributedTrainer(params, "sgd", None, hvd.Compression.none)))
"""


def run(**env):
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith("OMPI_") and key != "HOROVOD_GRADIENT_COMPRESSION"}
    environ.update({"PYTHONPATH": str(SOURCE), **env})
    done = subprocess.run([sys.executable, "-c", TRAINERS], env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(line.split() for line in done.stdout.splitlines()), done.stderr


def test_fp16_is_the_default_of_every_trainer_and_the_scripts_own_choice_wins():
    kinds, stderr = run(HOROVOD_GRADIENT_COMPRESSION="fp16")
    assert kinds == {"default": "FP16Compressor", "again": "FP16Compressor", "keyword": "NoneCompressor",
                     "positional": "NoneCompressor"}
    assert stderr.count("HOROVOD_GRADIENT_COMPRESSION=fp16: hvd.DistributedTrainer compresses gradients to fp16") == 1


def test_nothing_changes_without_the_variable_with_none_or_with_a_value_the_launcher_would_refuse():
    none = {"default": "NoneCompressor", "again": "NoneCompressor", "keyword": "NoneCompressor",
            "positional": "NoneCompressor"}
    assert run() == (none, "")
    assert run(HOROVOD_GRADIENT_COMPRESSION="none") == (none, "")
    kinds, stderr = run(HOROVOD_GRADIENT_COMPRESSION="bf16")
    assert kinds == none
    assert "warning: HOROVOD_GRADIENT_COMPRESSION='bf16' is not one of none, fp16: gradients are not compressed" in stderr

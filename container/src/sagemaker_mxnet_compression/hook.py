"""The launcher's horovod_gradient_compression for every Horovod Gluon script, the built-in programs and users'
alike, with no code change: `hvd.DistributedTrainer` compresses gradients as HOROVOD_GRADIENT_COMPRESSION says
(fp16: each gradient is cast to float16 for its allreduce, half the bytes on the network, and back) unless the
script passes `compression=` itself, which always wins.

How: the image's site-packages holds sagemaker_mxnet_compression.pth, which calls install() at every interpreter
start when the variable is set and not "none" (one environment lookup otherwise). install() waits for
horovod.mxnet to be imported, then wraps DistributedTrainer.__init__. Rank 0 says once, on its stderr, what the
first trainer it changed compresses.
"""

from __future__ import annotations

import os
import sys

from sagemaker_mxnet_import_hooks.after_import import after_import

VARIABLE = "HOROVOD_GRADIENT_COMPRESSION"
CHOICES = ("none", "fp16")
MODULE = "horovod.mxnet"
# DistributedTrainer(self, params, optimizer, optimizer_params=None, compression=..., ...): compression is its
# fourth positional argument after self.
COMPRESSION_POSITION = 4


def compressor(module, choice: str):
    return {"none": module.Compression.none, "fp16": module.Compression.fp16}[choice]


def wrap_trainer(module, choice: str) -> None:
    trainer_class = module.DistributedTrainer
    original = trainer_class.__init__
    chosen = compressor(module, choice)
    said = []

    def __init__(self, *args, **kwargs):
        if "compression" not in kwargs and len(args) < COMPRESSION_POSITION:
            kwargs["compression"] = chosen
            if not said and module.rank() == 0:
                said.append(True)
                sys.stderr.write(f"{VARIABLE}={choice}: hvd.DistributedTrainer compresses gradients to {choice} "
                                 "for their allreduce (the launcher's horovod_gradient_compression; "
                                 "compression= in the script wins)\n")
        original(self, *args, **kwargs)

    __init__.__wrapped__ = original
    trainer_class.__init__ = __init__


def install(env=None) -> None:
    """Called by sagemaker_mxnet_compression.pth at every interpreter start with the variable set. A value the
    launcher would have refused (it checks the hyperparameter) is a warning here, and nothing changes."""
    env = os.environ if env is None else env
    choice = env.get(VARIABLE, "none").strip().lower()
    if choice == "none":
        return
    if choice not in CHOICES:
        sys.stderr.write(f"warning: {VARIABLE}={env.get(VARIABLE)!r} is not one of {', '.join(CHOICES)}: "
                         "gradients are not compressed\n")
        return
    after_import(MODULE, lambda module: wrap_trainer(module, choice))

"""The launcher's straggler report for every Horovod Gluon script, the built-in programs and users' alike, with no
code change: hvd.DistributedTrainer's gradient allreduces are timed on every rank (recorder.py).

How: the image's site-packages holds sagemaker_mxnet_straggler.pth, which calls install() at every interpreter start
when SMMH_STRAGGLER_REPORT names a directory (one environment lookup when it is unset or "off"). install() waits for
horovod.mxnet to be imported, then wraps DistributedTrainer._allreduce_grads, which Trainer.step and
Trainer.allreduce_grads both call, and hvd.shutdown, where rank 0 writes its last report (as at interpreter exit). Gradient compression (sagemaker_mxnet_compression) wraps __init__: the two
compose in either order. The first trainer to step over every rank (more than one) is timed; others run as they are.
"""

from __future__ import annotations

import os
import sys

from sagemaker_mxnet_import_hooks.after_import import after_import

VARIABLE = "SMMH_STRAGGLER_REPORT"
EVERY_S_VARIABLE = "SMMH_STRAGGLER_EVERY_S"  # seconds between timed steps (the launcher's horovod_straggler_every_s)
OFF = ("", "off", "false", "0", "none")
MODULE = "horovod.mxnet"


def wrap_trainer(module, directory: str) -> None:
    trainer_class = module.DistributedTrainer
    original = trainer_class._allreduce_grads
    timed = []  # [Recorder] once a trainer over every rank stepped

    def _allreduce_grads(self):
        if not timed and spans_every_rank(module, self):
            from sagemaker_mxnet_straggler.recorder import Recorder

            timed.append(Recorder(module, sys.modules["mxnet"], self, directory))
        if not timed or timed[0].trainer is not self:
            return original(self)
        return timed[0].step(lambda: original(self))

    _allreduce_grads.__wrapped__ = original
    trainer_class._allreduce_grads = _allreduce_grads
    original_shutdown = module.shutdown

    def shutdown(*args, **kwargs):
        if timed:
            timed[0].finish()  # the built-in programs end with os._exit after it: no interpreter exit comes
        return original_shutdown(*args, **kwargs)

    shutdown.__wrapped__ = original_shutdown
    module.shutdown = shutdown


def spans_every_rank(module, trainer) -> bool:
    """A trainer whose allreduces are the job's: over more than one rank, and not a process set's subset of them."""
    process_set = getattr(trainer, "_process_set", module.global_process_set)
    return module.size() > 1 and process_set is module.global_process_set


def install(env=None) -> None:
    """Called by sagemaker_mxnet_straggler.pth at every interpreter start with the variable set (twice, by Debian's
    Python: after_import makes the change once)."""
    env = os.environ if env is None else env
    directory = env.get(VARIABLE, "").strip()
    if directory.lower() in OFF:
        return
    after_import(MODULE, lambda module: wrap_trainer(module, directory))

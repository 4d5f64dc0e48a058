"""Runs a user's Gluon training script unchanged (benchmarks/link_scaling.py --script) and measures it from outside
its code: the link benchmark's figures for any script that trains with a Gluon Trainer (Horovod's
DistributedTrainer is one).

The job's program is this file; the user's script sits beside it in the code directory, named by the
SCRIPT_PROBE_TARGET environment variable, and gets this program's command-line arguments. Hooks (installed when
the script imports them, so its own import order and environment come first):
- `gluon.Trainer.step` and `allreduce_grads`: counts the calls; after SCRIPT_PROBE_WARMUP of them (link_scaling's --warmup) it waits for the engine
  (mx.nd.waitall) and starts the clock; the clock stops after the script returns and the engine drains. A step's
  samples are the batch size the script passes to step(); its gradient bytes are the trainer's parameters with
  gradients, at their dtype's size.
- `horovod.mxnet.init`: the threads it starts are Horovod's (the per-thread CPU split, as the link probe's).
Two experiments by environment: SCRIPT_PROBE_RENICE=N puts every thread of the rank but Horovod's N nicer
(Horovod's thread first on the rank's cores; threads started later inherit it), SCRIPT_PROBE_BATCH is the batch a
step counts when the script calls allreduce_grads() (no batch size there). Every rank writes
script_probe.rank<N>.json to its SM_MODEL_DIR: the measured steps, their seconds, global samples/s (the ranks
step together, so the world size x its own rate), gradient bytes and every rank's CPU per step by thread kind.
"""

import json
import os
import runpy
import sys
import time

from sagemaker_mxnet_import_hooks.after_import import after_import
from thread_cpu import cpu_split, thread_ticks  # the link probe's, copied beside this file by the benchmark

WARMUP = int(os.environ.get("SCRIPT_PROBE_WARMUP", "3"))


class Clock:
    def __init__(self):
        self.calls, self.batch, self.gradient_bytes = 0, None, 0
        self.started = self.start_ticks = None
        self.communication_tids: set = set()

    def on_step(self, trainer, batch_size) -> None:
        self.calls += 1
        if self.calls == WARMUP + 1:
            import mxnet as mx
            import numpy

            mx.nd.waitall()
            self.started, self.start_ticks = time.monotonic(), thread_ticks()
            self.batch = batch_size
            self.gradient_bytes = sum(p.data().size * numpy.dtype(p.dtype).itemsize
                                      for p in trainer._params if p.grad_req != "null")


CLOCK = Clock()


def hook_trainer(trainer_module) -> None:
    trainer_class = trainer_module.Trainer
    step, allreduce_grads = trainer_class.step, trainer_class.allreduce_grads

    def timed_step(self, batch_size, *args, **kwargs):
        CLOCK.on_step(self, batch_size)
        return step(self, batch_size, *args, **kwargs)

    def timed_allreduce_grads(self, *args, **kwargs):  # no batch size: the script's --batch, if it has one
        CLOCK.on_step(self, int(os.environ.get("SCRIPT_PROBE_BATCH", "1")))
        return allreduce_grads(self, *args, **kwargs)

    trainer_class.step, trainer_class.allreduce_grads = timed_step, timed_allreduce_grads


def hook_horovod(module) -> None:
    init = module.init

    def init_noting_threads(*args, **kwargs):
        before = set(thread_ticks())
        result = init(*args, **kwargs)
        CLOCK.communication_tids = set(thread_ticks()) - before
        nicer = int(os.environ.get("SCRIPT_PROBE_RENICE", "0"))
        for tid in before if nicer else ():  # threads they start later inherit it; Horovod's keep 0
            os.setpriority(os.PRIO_PROCESS, tid, nicer)
        return result

    module.init = init_noting_threads


def main() -> None:
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.environ["SCRIPT_PROBE_TARGET"])
    after_import("mxnet.gluon.trainer", hook_trainer)
    after_import("horovod.mxnet", hook_horovod)
    sys.argv = [target] + sys.argv[1:]
    runpy.run_path(target, run_name="__main__")
    import mxnet as mx

    mx.nd.waitall()
    if CLOCK.started is None:
        sys.exit(f"script_probe: the script called Trainer.step {CLOCK.calls} times, fewer than the warm-up "
                 f"({WARMUP}) + 1")
    seconds, steps = time.monotonic() - CLOCK.started, CLOCK.calls - WARMUP
    size, rank = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")), int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    record = {"size": size, "measured_steps": steps, "step_s": seconds / steps,
              "samples_per_s": size * (CLOCK.batch or 1) * steps / seconds, "gradient_bytes": CLOCK.gradient_bytes,
              "cpu_ms_per_step": cpu_split(CLOCK.start_ticks, thread_ticks(), CLOCK.communication_tids, steps), "measured_from": CLOCK.started}
    path = os.path.join(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"), f"script_probe.rank{rank}.json")
    with open(path, "w") as f:
        json.dump(record, f)
    print(f"script_probe: rank {rank}: {steps} steps of {record['step_s'] * 1000:.1f} ms", flush=True)


if __name__ == "__main__":
    main()

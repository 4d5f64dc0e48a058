"""One rank's training session, the MXNet side of the skeleton every program shares.

Horovod, MXNet's distributed kvstore (a parameter-server worker: kvstore_workers.py), or a single-process
stand-in when a program runs as one process without either; rank-0 logging and
TensorBoard; SageMaker Debugger's hook (debugger.py); collectives that cost nothing in one process; resume from and save to numbered checkpoints;
the SIGTERM stop vote; the orderly stop. Imports MXNet: create it after the input has been checked.

Conventions:
  * Epochs are counted from 0 in code. A checkpoint is named by the epochs done (``-epoch-0003``: epochs
    0..2 complete); a stop in epoch e after b steps is ``-epoch-{e+1}-batch-{b}``.
  * Every rank calls the collectives in the same order with the same names.
"""

import os
import tempfile
import time

from mxnet_programs.checkpoints import CheckpointManager
from mxnet_programs.debugger import DebuggerHook
from mxnet_programs.launch import HOROVOD, PARAMETER_SERVER_KVSTORES
from mxnet_programs.metrics import TensorBoardWriter
from mxnet_programs.process import ProgramError, Stopped, log, warn


class SingleProcessHorovod:
    """The slice of horovod.mxnet the programs use, for one process (Horovod not installed, or not wanted)."""

    Sum = "Sum"

    def init(self):
        pass

    def shutdown(self):
        pass

    def rank(self):
        return 0

    def local_rank(self):
        return 0

    def size(self):
        return 1


def import_horovod(prog, env):
    """horovod.mxnet, initialised, or the stand-in when Horovod cannot be imported in a single-process run
    (several ranks without Horovod is an error)."""
    try:
        import horovod.mxnet as hvd
    except ImportError as exc:
        if env.size > 1:
            raise ProgramError(f"{env.size} ranks were launched but horovod.mxnet cannot be imported: {exc}") \
                from None
        warn(prog, f"horovod.mxnet is not importable ({exc}); training as one process")
        return SingleProcessHorovod()
    hvd.init()
    if (hvd.rank(), hvd.size()) != (env.rank, env.size):
        raise ProgramError(f"Horovod says rank {hvd.rank()} of {hvd.size()}, the MPI environment said "
                           f"{env.rank} of {env.size}")
    return hvd


def collectives(prog, env, kvstore, mx):
    """What the ranks reach each other through: Horovod, the parameter servers, or nothing (one process)."""
    if kvstore == HOROVOD:
        return import_horovod(prog, env)
    if kvstore in PARAMETER_SERVER_KVSTORES:
        from mxnet_programs.kvstore_workers import KVStoreWorkers

        workers = KVStoreWorkers(mx, kvstore, env)
        workers.init()
        return workers
    return SingleProcessHorovod()


class Session:
    def __init__(self, prog, env, stop, kvstore=HOROVOD):
        """kvstore: horovod, a dist_* kvstore (a parameter-server worker), or local/device (one process)."""
        import mxnet as mx
        import numpy as np

        self.mx, self.np, self.prog, self.stop = mx, np, prog, stop
        self.kvstore = kvstore
        self.hvd = collectives(prog, env, kvstore, mx)
        self.uses_horovod = kvstore == HOROVOD and not isinstance(self.hvd, SingleProcessHorovod)
        self.uses_parameter_servers = kvstore in PARAMETER_SERVER_KVSTORES
        # One device per process under Horovod, or with several parameter-server workers per host; one process
        # over every device of its host otherwise.
        self.one_device_per_rank = self.uses_horovod or (self.uses_parameter_servers and env.local_size > 1)
        self.rank, self.size, self.local_rank = self.hvd.rank(), self.hvd.size(), self.hvd.local_rank()
        self.distributed = self.size > 1
        self.tb = TensorBoardWriter(None, enabled=False)
        self.checkpoints = None
        # SageMaker Debugger's hook when the job has a configuration (debugger.py); nothing otherwise.
        self.debugger = DebuggerHook.open(prog, self.rank, self.uses_parameter_servers)

    def log(self, message):
        if self.rank == 0:
            log(message)

    def open_tensorboard(self, logdir, enabled):
        self.tb = TensorBoardWriter(logdir, enabled and self.rank == 0)

    # ---- collectives (no-ops in one process)

    def allreduce_sum(self, values, name):
        """Element-wise sum over the ranks, as a float64 numpy array."""
        if not self.distributed:
            return self.np.asarray(values, dtype="float64")
        array = self.mx.nd.array(values, dtype="float64")
        return self.hvd.allreduce(array, op=self.hvd.Sum, name=name).asnumpy()

    def mean_over_ranks(self, values, name):
        return (self.allreduce_sum(values, name) / self.size).tolist()

    def broadcast_object(self, obj, name):
        return self.hvd.broadcast_object(obj, root_rank=0, name=name) if self.distributed else obj

    def allgather_object(self, obj, name):
        return self.hvd.allgather_object(obj, name=name) if self.distributed else [obj]

    def broadcast_parameters(self, params):
        if self.distributed:
            self.hvd.broadcast_parameters(params, root_rank=0)

    def trainer(self, params, optimizer, optimizer_params, kvstore=None, gradient_groups=0):
        """Horovod's DistributedTrainer (gradients averaged over ranks), a Gluon Trainer over the parameter
        servers, else a Gluon Trainer: with `kvstore` ("device" or "local") when one process drives several
        devices. `gradient_groups`: Horovod's num_groups (0: one allreduce per parameter, each started as soon as
        its gradient is ready)."""
        if self.uses_horovod:
            return self.hvd.DistributedTrainer(params, optimizer, optimizer_params, num_groups=gradient_groups)
        if self.uses_parameter_servers:
            return self.hvd.trainer(params, optimizer, optimizer_params)
        return self.mx.gluon.Trainer(params, optimizer, optimizer_params, kvstore=kvstore,
                                     update_on_kvstore=False if kvstore else None)

    # ---- SIGTERM

    def stop_vote(self, name):
        return StopVote(self, name)

    def agree_stop(self, name):
        """True on every rank when any rank got SIGTERM (one blocking allreduce)."""
        return self.allreduce_sum([1.0 if self.stop.requested else 0.0], name)[0] > 0

    def finish_stopped(self):
        """After a stop was agreed and rank 0 checkpointed: hold every rank until the checkpoint is on disk
        (mpirun kills the job as soon as one rank exits non-zero), then end with exit 143."""
        self.allreduce_sum([0.0], f"{self.prog}.stop.barrier")
        self.log(f"{self.prog}: stopped by SIGTERM")
        self.close()
        raise Stopped()

    def close(self):
        self.tb.close()
        self.debugger.close()
        self.hvd.shutdown()

    # ---- checkpoints

    def open_checkpoints(self, directory, prefix, keep):
        self.checkpoints = CheckpointManager(directory, prefix=prefix, keep=keep)

    def resume(self, net, trainer, ctx):
        """Loads the newest checkpoint, if any: parameters on rank 0 (the others receive them with the
        broadcast_parameters that follows), optimizer states on every rank (the checkpoint dir is local to
        rank 0's host: the bytes travel by broadcast). Returns (state dict, stem) or (None, None)."""
        payload = None
        if self.rank == 0:
            state, stem = self.checkpoints.latest()
            if state is not None:
                files = state["files"]
                net.load_parameters(os.path.join(self.checkpoints.directory, files["params"]), ctx=ctx)
                with open(os.path.join(self.checkpoints.directory, files["states"]), "rb") as f:
                    payload = {"state": state, "stem": stem, "states": f.read()}
        payload = self.broadcast_object(payload, f"{self.prog}.resume")
        if payload is None:
            return None, None
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "states")
            with open(path, "wb") as f:
                f.write(payload["states"])
            trainer.load_states(path)
        return payload["state"], payload["stem"]

    def save_checkpoint(self, net, trainer, epochs_done, state, batch=None):
        """Rank 0: parameters, optimizer states and `state` (JSON), named by epochs done (+ batch)."""
        if self.rank != 0:
            return
        state = dict(state, world_size=self.size, time=time.time())
        stem = self.checkpoints.save(epochs_done, state, {"params": net.save_parameters,
                                                          "states": trainer.save_states}, batch=batch)
        log(f"{self.prog}: saved checkpoint {stem}.params")


def start_position(state):
    """(first epoch to run, steps of it already done) after resuming from a checkpoint's state."""
    if state is None:
        return 0, 0
    if state.get("batch") is None:
        return int(state["epoch"]), 0
    return int(state["epoch"]) - 1, int(state["batch"])


class StopVote:
    """The ranks' agreement to stop mid-epoch, without a synchronisation per step.

    After each step every rank contributes its SIGTERM flag to an asynchronous sum; the sum pushed after
    step b is read after step b+1, so all ranks stop after the same step. In one process the flag is read
    directly. `final` is the blocking vote at the end of an epoch (it counts a sum still in flight).
    """

    def __init__(self, session, name):
        self.session, self.name = session, name
        self._pending = None
        self._steps = 0

    def _flag(self):
        return 1.0 if self.session.stop.requested else 0.0

    def after_step(self):
        """True (on every rank alike) when the ranks agreed to stop after this step."""
        s = self.session
        if not s.distributed:
            return s.stop.requested
        if self._pending is not None and self._pending.asscalar() > 0:
            return True
        self._pending = s.hvd.allreduce(s.mx.nd.array([self._flag()]), op=s.hvd.Sum,
                                        name=f"{self.name}.{self._steps % 2}")
        self._steps += 1
        return False

    def final(self):
        in_flight = self._pending.asscalar() if self._pending is not None else 0.0
        self._pending = None
        return self.session.allreduce_sum([self._flag() + in_flight], f"{self.name}.final")[0] > 0

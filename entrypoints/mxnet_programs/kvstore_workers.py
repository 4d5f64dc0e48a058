"""The slice of horovod.mxnet the programs use, over MXNet's distributed kvstore (kvstore dist_sync or
dist_device_sync): a parameter-server job's workers reach each other through the servers only.

A sum is a push then a pull of one key: the servers add every worker's push before any pull of it returns
(synchronous mode, no optimizer on the servers: the Trainer keeps update_on_kvstore=False, so every worker
applies the same summed gradients itself, as under Horovod). Broadcasts and gathers are sums in which the other
workers contribute zeros. Keys are allocated by name in the order of first use, far above the Trainer's (one per
parameter, from 0): every worker calls the collectives in the same order with the same names, so they agree.

Ranks are the launcher's (SMMH_WORKER_RANK: host by host, as MPI numbers ranks), known before MXNet starts;
ps-lite numbers its workers in the order they reach the scheduler, which only the kvstore's own use sees.
"""

import pickle

import numpy as np

# The Trainer's keys are its parameters' indexes: 0, 1, ... Ours start far above them, and below 2**31 / 9973:
# MXNet picks a key's server as (key * 9973) % servers in a 32-bit int, which overflows above that (measured:
# key 2**24 failed "Check failed: ps_key < krs[server].end()").
KEY_BASE = 100_000


class KVStoreWorkers:
    Sum = "Sum"

    def __init__(self, mx, kvstore_type, env):
        self.mx, self.kvstore_type, self.env = mx, kvstore_type, env
        self.kv = None
        self.keys = {}  # (name, shape, dtype) -> key

    def init(self):
        """Create the kvstore: connects to the scheduler and waits until every server and worker has."""
        from mxnet_programs.process import ProgramError

        self.kv = self.mx.kv.create(self.kvstore_type)
        if self.kv.num_workers != self.env.size:
            raise ProgramError(f"the kvstore has {self.kv.num_workers} workers, the launcher started {self.env.size}")

    def shutdown(self):
        """Leave together, as Horovod's shutdown does: the programs end with os._exit, which skips the kvstore's
        own barrier at exit."""
        if self.kv is not None:
            self.kv._barrier()

    def trainer(self, params, optimizer, optimizer_params):
        """A Gluon Trainer over the servers. They sum the workers' gradients and each worker applies them itself
        (update_on_kvstore=False), averaged over the workers as Horovod's DistributedTrainer does; the optimizer's
        state stays the worker's own, so checkpoints hold it."""
        trainer = _first_pull_waiting_trainer(self.mx)(params, optimizer, optimizer_params, kvstore=self.kv,
                                                        update_on_kvstore=False)
        trainer._scale /= self.env.size
        return trainer

    def rank(self):
        return self.env.rank

    def local_rank(self):
        return self.env.local_rank

    def size(self):
        return self.env.size

    def _key(self, name, shape, dtype):
        """The key of this collective, created (on every worker alike, with zeros) on first use."""
        spec = (name, tuple(shape), str(dtype))
        if spec not in self.keys:
            self.keys[spec] = KEY_BASE + len(self.keys)
            self.kv.init(self.keys[spec], self.mx.nd.zeros(shape, dtype=dtype))
        return self.keys[spec]

    def allreduce(self, array, op=Sum, name=None):
        """The element-wise sum over the workers (asynchronous, as an MXNet operation: reading it waits)."""
        if op != self.Sum or name is None:
            raise ValueError("only named sums are supported over the kvstore")
        key = self._key(name, array.shape, array.dtype)
        self.kv.push(key, array)
        out = self.mx.nd.zeros(array.shape, dtype=array.dtype)
        self.kv.pull(key, out=out)
        return out

    def _bytes_sum(self, data, length, offset, name):
        """Each worker's bytes at its offset in a zero buffer of `length`, summed: their concatenation. As
        float16 (exact for 0..2048): the servers add floating-point arrays only."""
        buffer = np.zeros(length, dtype=np.float16)
        buffer[offset:offset + len(data)] = np.frombuffer(data, dtype=np.uint8)
        summed = self.allreduce(self.mx.nd.array(buffer, dtype="float16"), name=name).asnumpy()
        return summed.astype(np.uint8).tobytes()

    def broadcast_object(self, obj, root_rank=0, name=None):
        data = pickle.dumps(obj) if self.rank() == root_rank else b""
        sizes = self.allreduce(self.mx.nd.array([len(data)], dtype="float64"), name=f"{name}.size").asnumpy()
        return pickle.loads(self._bytes_sum(data, int(sizes[0]), 0, f"{name}.{int(sizes[0])}"))

    def allgather_object(self, obj, name=None):
        data = pickle.dumps(obj)
        mine = np.zeros(self.size(), dtype=np.float64)
        mine[self.rank()] = len(data)
        sizes = self.allreduce(self.mx.nd.array(mine, dtype="float64"), name=f"{name}.sizes").asnumpy().astype(int)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        joined = self._bytes_sum(data, int(offsets[-1]), int(offsets[self.rank()]), f"{name}.{int(offsets[-1])}")
        return [pickle.loads(joined[offsets[r]:offsets[r + 1]]) for r in range(self.size())]

    def broadcast_parameters(self, params, root_rank=0):
        """Every parameter as the root has it (in name order, as every worker has the same names)."""
        for name in sorted(params):
            param = params[name]
            value = param.data()
            # Through numpy: an MKLDNN-laid-out array is read back in the default layout.
            mine = value.asnumpy() if self.rank() == root_rank else np.zeros(value.shape, dtype=value.dtype)
            summed = self.allreduce(self.mx.nd.array(mine, dtype=value.dtype), name=f"param.{name}")
            param.set_data(summed)


def _first_pull_waiting_trainer(mx):
    """mx.gluon.Trainer whose first step waits for the weights it pulls from the servers.

    The Trainer creates its keys at its first step, after the first gradients exist: it pulls the initial
    weights, then pushes and pulls the gradients on the same keys. MXNet does not order the two (they use
    different buffers). When the gradients' round completes first, the servers (no optimizer on them) hold the
    summed gradients, and the late pull makes them this worker's weights: the workers then train apart
    (52 of 179 two-worker jobs differed after one step; docs/parameter-server.md)."""

    class FirstPullWaitingTrainer(mx.gluon.Trainer):
        def _init_params(self):
            super()._init_params()
            for param in self._params:
                if not param._deferred_init:
                    for array in param.list_data():
                        array.wait_to_read()

    return FirstPullWaitingTrainer

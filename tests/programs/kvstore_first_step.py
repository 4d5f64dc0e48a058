"""A parameter-server worker's first training steps through the programs' Session (kvstore dist_sync): `trials`
(argv[1]) fresh networks, each with its own Trainer on keys no earlier trial used, so that each trial's first step
creates its keys as a job's first step does; each trial's gradients complete before its step starts, as a fast
backward leaves them. Prints a digest of each trial's weights after its step, one a line: every worker must print
the same digests."""

import hashlib
import sys

import mxnet as mx
from mxnet_programs.process import StopRequest
from mxnet_programs.sagemaker_env import dist_env
from mxnet_programs.session import Session


class MovedKeys(mx.kv.KVStore):
    """The job's kvstore with every key the Trainer uses (its parameters' indexes, 0, 1, ...) moved by `offset`."""

    def __init__(self, kv, offset):
        super().__init__(kv.handle)
        self.kv, self.offset = kv, offset  # the job's kvstore owns the handle: kept alive, freed by it alone

    def __del__(self):
        pass

    def init(self, key, value):
        super().init(key + self.offset, value)

    def broadcast(self, key, value, out, priority=0):
        super().broadcast(key + self.offset, value, out, priority)

    def pushpull(self, key, value, out=None, priority=0):
        super().pushpull(key + self.offset, value, out, priority)

    def push(self, key, value, priority=0):
        super().push(key + self.offset, value, priority)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        super().pull(key + self.offset, out, priority, ignore_sparse)


def first_step(session, trial):
    mx.random.seed(1000 * trial + session.rank)  # different weights per worker, until the broadcast
    net = mx.gluon.nn.HybridSequential(prefix=f"net{trial}_")
    with net.name_scope():
        net.add(mx.gluon.nn.Dense(64, activation="relu"), mx.gluon.nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 20)))
    params = net.collect_params()
    session.broadcast_parameters(params)
    kv = session.hvd.kv
    session.hvd.kv = MovedKeys(kv, trial * len(params.keys()))
    try:
        trainer = session.trainer(params, "sgd", {"learning_rate": 0.1})
    finally:
        session.hvd.kv = kv
    x = mx.nd.random.uniform(shape=(8, 20)) + session.rank  # each worker its own data
    with mx.autograd.record():
        loss = mx.gluon.loss.SoftmaxCrossEntropyLoss()(net(x), mx.nd.zeros((8,)))
    loss.backward()
    mx.nd.waitall()
    trainer.step(8)
    return hashlib.sha256(b"".join(params[name].data().asnumpy().tobytes() for name in sorted(params))).hexdigest()


session = Session("first_step", dist_env(), StopRequest(), kvstore="dist_sync")
for trial in range(int(sys.argv[1])):
    print(first_step(session, trial), flush=True)
session.close()

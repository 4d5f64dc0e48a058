"""A parameter-server worker's first training step through the programs' Session (kvstore dist_sync), its
gradients complete before the step starts, as a fast backward leaves them: prints a digest of its weights
after the step. Every worker must print the same digest."""

import hashlib

import mxnet as mx
from mxnet_programs.process import StopRequest
from mxnet_programs.sagemaker_env import dist_env
from mxnet_programs.session import Session

session = Session("first_step", dist_env(), StopRequest(), kvstore="dist_sync")
mx.random.seed(session.rank)  # different weights per worker, until the broadcast
net = mx.gluon.nn.HybridSequential(prefix="net_")
with net.name_scope():
    net.add(mx.gluon.nn.Dense(64, activation="relu"), mx.gluon.nn.Dense(10))
net.initialize(mx.init.Xavier())
net(mx.nd.zeros((1, 20)))
session.broadcast_parameters(net.collect_params())
trainer = session.trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
x = mx.nd.random.uniform(shape=(8, 20)) + session.rank  # each worker its own data
with mx.autograd.record():
    loss = mx.gluon.loss.SoftmaxCrossEntropyLoss()(net(x), mx.nd.zeros((8,)))
loss.backward()
mx.nd.waitall()
trainer.step(8)
weights = net.collect_params()
print(hashlib.sha256(b"".join(weights[name].data().asnumpy().tobytes() for name in sorted(weights))).hexdigest())
session.close()

"""A user's Horovod + Gluon script with no smdebug in it, as written for AWS's MXNet images, whose zero-code-change
Debugger saved its tensors: a forward pass to infer shapes, training steps, validation."""

import horovod.mxnet as hvd
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

hvd.init()
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(2))
net.initialize(mx.init.Xavier())
net.hybridize()
net(mx.nd.zeros((1, 4)))  # shapes, outside any training step
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
hvd.broadcast_parameters(net.collect_params(), root_rank=0)
rng = np.random.default_rng(hvd.rank())
for _ in range(8):
    x = mx.nd.array(rng.normal(size=(32, 4)))
    y = mx.nd.array((x[:, 0] > 0).asnumpy())
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    trainer.step(32)
for _ in range(2):
    net(mx.nd.array(rng.normal(size=(32, 4)))).wait_to_read()
print(f"rank {hvd.rank()}: done, loss {loss.mean().asscalar():.4f}", flush=True)

"""A user's Gluon script for MXNet's parameter servers (distribution={'parameter_server': {'enabled': True}}), with no
smdebug in it, as written for AWS's MXNet images, whose zero-code-change Debugger saved its tensors: a dist_sync
kvstore under the Trainer, a forward pass to infer shapes, training steps, validation."""

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

kv = mx.kv.create("dist_sync")
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(2))
net.initialize(mx.init.Xavier())
net.hybridize()
net(mx.nd.zeros((1, 4)))  # shapes, outside any training step
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
rng = np.random.default_rng(kv.rank)
for _ in range(8):
    x = mx.nd.array(rng.normal(size=(32, 4)))
    y = mx.nd.array((x[:, 0] > 0).asnumpy())
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    trainer.step(32 * kv.num_workers)
for _ in range(2):
    net(mx.nd.array(rng.normal(size=(32, 4)))).wait_to_read()
print(f"worker {kv.rank} of {kv.num_workers}: done, loss {loss.mean().asscalar():.4f}", flush=True)

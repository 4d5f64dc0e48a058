"""A user's Horovod + Gluon script as smdebug's MXNet documentation writes it for SageMaker: the hook from the job's
configuration (smd.Hook.create_from_json_file()), the model and the loss registered with register_block, the mode
set for validation. Nothing in it knows this image."""

import horovod.mxnet as hvd
import mxnet as mx
import numpy as np
import smdebug.mxnet as smd
from mxnet import autograd, gluon

hvd.init()
hook = smd.Hook.create_from_json_file()
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(2))
net.initialize(mx.init.Xavier())
net.hybridize()
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
hook.register_block(net)
hook.register_block(loss_fn)
trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
hvd.broadcast_parameters(net.collect_params(), root_rank=0)
rng = np.random.default_rng(hvd.rank())
for _ in range(8):
    x = mx.nd.array(rng.normal(size=(32, 4)))
    y = mx.nd.array((x[:, 0] > 0).asnumpy())
    hook.set_mode(smd.modes.TRAIN)
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    trainer.step(32)
hook.set_mode(smd.modes.EVAL)
for _ in range(2):
    loss_fn(net(mx.nd.array(rng.normal(size=(32, 4)))), mx.nd.zeros(32)).wait_to_read()
print(f"rank {hvd.rank()}: done, loss {loss.mean().asscalar():.4f}", flush=True)

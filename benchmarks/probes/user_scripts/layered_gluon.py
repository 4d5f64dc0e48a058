"""A user's Horovod Gluon script with knobs: the link benchmark's grid of user-script shapes
(benchmarks/link_scaling.py --script; issue 44). Its defaults are the script users reported
(../shared/user-scripts/imperative_gluon_link.py): --layers Dense layers of --width x --width, each followed by a
delay operator that sleeps off the CPU (forward F/L, backward 2F/L per layer: a GPU's compute leaves the host's CPU
free), a Dense head, batch 2, hvd.DistributedTrainer, trainer.step every step, nothing synchronising the steps.

Knobs, one per way a real script differs:
  --hybridize true      HybridBlocks, hybridized
  --delay before        the delay before each Dense layer instead of after it (the weight's gradient then comes
                        before that layer's share of the backward, not after)
  --cpu_ms M            M ms of real CPU work (numpy on the operator's thread) in each layer's forward, 2M in its
                        backward: a CPU-side share of the step (data, a CPU op, Python)
  --batch B             the Dense layers' real compute grows with it
  --update allreduce    trainer.allreduce_grads() without update() (as a GPU host updating on the GPU would leave
                        the CPU); `step` (default) updates the weights on this CPU
  --sync step           wait for the step's loss every step (loss.asscalar(), as scripts that log it do)
  --sync gradients      wait for every summed gradient every step (as the link probe does: with --update
                        allreduce, the next forward cannot run ahead of the allreduces)
  --bias false          Dense layers without bias (half the tensors Horovod negotiates)
"""
import argparse
import time

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=12)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--batch", type=int, default=2)
p.add_argument("--width", type=int, default=1440)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--forward_s", type=float, default=0.15)
p.add_argument("--cpu_ms", type=float, default=0.0)
p.add_argument("--hybridize", default="false")
p.add_argument("--delay", choices=["after", "before"], default="after")
p.add_argument("--update", choices=["step", "allreduce"], default="step")
p.add_argument("--sync", choices=["none", "step", "gradients"], default="none")
p.add_argument("--bias", default="true")
a = p.parse_args()

import horovod.mxnet as hvd  # noqa: E402
import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402

DELAY = a.forward_s / a.layers
WORK = np.ones((256, 256), dtype=np.float32)


def cpu_work(seconds: float) -> None:
    """Real CPU for `seconds` of this thread's CPU time (numpy releases the GIL while it multiplies)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        WORK.dot(WORK)


class Delay(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        time.sleep(DELAY)
        cpu_work(a.cpu_ms / 1000)
        self.assign(out_data[0], req[0], in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        time.sleep(2 * DELAY)
        cpu_work(2 * a.cpu_ms / 1000)
        self.assign(in_grad[0], req[0], out_grad[0])


@mx.operator.register("delay")
class DelayProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def list_arguments(self):
        return ["data"]

    def list_outputs(self):
        return ["output"]

    def infer_shape(self, in_shape):
        return in_shape, in_shape, []

    def create_operator(self, ctx, shapes, dtypes):
        return Delay()


class Layer(gluon.HybridBlock):
    def __init__(self, width: int):
        super().__init__()
        self.dense = gluon.nn.Dense(width, activation="relu", in_units=width, use_bias=a.bias == "true")

    def hybrid_forward(self, F, x):
        if a.delay == "before":
            return self.dense(F.Custom(x, op_type="delay"))
        return F.Custom(self.dense(x), op_type="delay")


hvd.init()
mx.random.seed(1)
net = gluon.nn.HybridSequential()
for _ in range(a.layers):
    net.add(Layer(a.width))
net.add(gluon.nn.Dense(10, in_units=a.width))
net.initialize(mx.init.Xavier())
if a.hybridize == "true":
    net.hybridize()
x = mx.nd.random.uniform(shape=(a.batch, a.width))
y = mx.nd.array(mx.nd.random.randint(0, 10, shape=(a.batch,)).asnumpy())
net(x)
params = net.collect_params()
hvd.broadcast_parameters(params, root_rank=0)
trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": 0.0001})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
for _step in range(a.warmup + a.steps):
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    if a.update == "step":
        trainer.step(a.batch)
    else:
        trainer.allreduce_grads()
    if a.sync == "step":
        loss.mean().asscalar()
    elif a.sync == "gradients":
        for param in params.values():
            param.grad().wait_to_read()
mx.nd.waitall()
print(f"layered_gluon rank={hvd.rank()} size={hvd.size()} steps={a.warmup + a.steps}", flush=True)

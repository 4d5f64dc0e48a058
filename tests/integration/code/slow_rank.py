"""A user's Gluon script for the straggler report's tests: a small network trained with hvd.DistributedTrainer on
random data, no code for the report. --slow-rank R sleeps --extra-s seconds before each step's forward on rank R;
--slow-host H --passes K: the ranks of host H run each step's forward and backward K times (the same gradients; a
host K times slower at the step's work, as a slower or busier machine is).

Each rank records, every step, what the report estimates another way: when it had its gradients ready (its
arrival, by time.monotonic(): one clock for every container of a job on one machine, which hosts of a real job do
not share, so the report may not use it) and how long it slept. It waits for its gradients before and after
trainer.step to do so, and writes both to its host's model directory (rank-R.json, every 50 steps and at the end).

--fail-rank R --fail-at-step S: rank R raises at step S (a job that ends early).
"""

import argparse
import json
import os
import time

import horovod.mxnet as hvd
import mxnet as mx
from mxnet import autograd, gluon

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--hidden", type=int, default=256)
parser.add_argument("--slow-rank", type=int, default=-1)
parser.add_argument("--extra-s", type=float, default=0.0)
parser.add_argument("--slow-host", default="")
parser.add_argument("--passes", type=int, default=1)
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--fail-at-step", type=int, default=-1)
args, _ = parser.parse_known_args()

hvd.init()
rank = hvd.rank()
mx.random.seed(rank)
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(args.hidden, activation="relu", in_units=784),
        gluon.nn.Dense(args.hidden, activation="relu", in_units=args.hidden), gluon.nn.Dense(10, in_units=args.hidden))
net.initialize(mx.init.Xavier())
net.hybridize()
params = net.collect_params()
hvd.broadcast_parameters(params, root_rank=0)
trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": 0.01})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
images = mx.nd.random.uniform(shape=(args.batch, 784))
labels = mx.nd.random.randint(0, 10, shape=(args.batch,)).astype("float32")
gradients = [param.grad() for param in params.values() if param.grad_req != "null"]

passes = args.passes if os.environ.get("SM_CURRENT_HOST") == args.slow_host else 1
ready, slept = [], []
path = os.path.join(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"), f"rank-{rank}.json")


def write_record():
    with open(path + ".tmp", "w") as file:
        json.dump({"rank": rank, "host": os.environ.get("SM_CURRENT_HOST"), "ready_s": ready, "slept_s": slept}, file)
    os.replace(path + ".tmp", path)


for step in range(args.steps):
    if step % 50 == 0:
        write_record()
    if step == args.fail_at_step and rank == args.fail_rank:
        raise ValueError(f"rank {rank} was asked to fail at step {step}")
    if rank == args.slow_rank:
        started = time.monotonic()
        time.sleep(args.extra_s)
        slept.append(time.monotonic() - started)
    for _ in range(passes):
        with autograd.record():
            loss = loss_fn(net(images), labels)
        loss.backward()
    for gradient in gradients:
        gradient.wait_to_read()
    ready.append(time.monotonic())
    trainer.step(args.batch)
    for gradient in gradients:
        gradient.wait_to_read()
    loss.mean().asscalar()

write_record()

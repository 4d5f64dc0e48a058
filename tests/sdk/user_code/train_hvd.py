"""A user's Horovod MXNet script, in the style of Horovod's examples/mxnet (hvd.init, broadcast_parameters,
DistributedTrainer, rank 0 saves the model), as users bring it to SageMaker's MXNet estimator or ModelTrainer.

Each rank also writes what it saw to $SM_OUTPUT_DATA_DIR/rank-<rank>.json (output.tar.gz), for the tests.
"""

import argparse
import json
import os
import sys

import horovod.mxnet as hvd
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--train", default=os.environ.get("SM_CHANNEL_TRAIN"))
    args = parser.parse_args()  # strict: any launcher setting passed as an argument fails here

    hvd.init()
    data = np.loadtxt(os.path.join(args.train, "train.csv"), delimiter=",", dtype="float32")
    # Every rank takes its own equal share, so every rank runs the same number of steps.
    share = data[hvd.rank()::hvd.size()]
    x, y = share[:, 1:], share[:, 0]
    loader = gluon.data.DataLoader(gluon.data.ArrayDataset(mx.nd.array(x), mx.nd.array(y)),
                                   batch_size=args.batch_size, shuffle=True, last_batch="discard")

    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(2))
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net.hybridize()
    net(mx.nd.zeros((1, x.shape[1])))  # finish deferred initialization before the broadcast
    params = net.collect_params()
    hvd.broadcast_parameters(params, root_rank=0)
    trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": args.lr * hvd.size()})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    for epoch in range(args.epochs):
        for batch, label in loader:
            with autograd.record():
                loss = loss_fn(net(batch), label)
            loss.backward()
            trainer.step(args.batch_size)
        accuracy = float((net(mx.nd.array(x)).argmax(axis=1) == mx.nd.array(y)).mean().asscalar())
        print(f"epoch={epoch + 1} rank={hvd.rank()} accuracy={accuracy:.4f}", flush=True)

    seen = {
        "rank": hvd.rank(), "size": hvd.size(), "local_rank": hvd.local_rank(), "local_size": hvd.local_size(),
        "host": os.environ.get("SM_CURRENT_HOST"), "argv": sys.argv[1:],
        "marker": os.environ.get("USER_MARKER"), "accuracy": accuracy,
        # Identical on every rank when the gradients were averaged across all of them.
        "param_sums": [float(p.data().sum().asscalar()) for p in params.values()],
    }
    output = os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data")
    with open(os.path.join(output, f"rank-{hvd.rank()}.json"), "w") as f:
        json.dump(seen, f)
    if hvd.rank() == 0:
        net.export(os.path.join(args.model_dir, "model"))  # model-symbol.json, model-0000.params


if __name__ == "__main__":
    main()

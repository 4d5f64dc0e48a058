"""A user's parameter-server MXNet script, as written for AWS's MXNet image and SDK v2's
distribution={'parameter_server': {'enabled': True}}: a dist_sync kvstore, the optimizer on the servers
(Gluon's default there), the scheduler's host saves the model (sagemaker_mxnet_container.training_utils).

Each worker also writes what it saw to $SM_OUTPUT_DATA_DIR/worker-<kvstore rank>.json, for the tests.
"""

import argparse
import json
import os
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from sagemaker_mxnet_container.training_utils import scheduler_host


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--train", default=os.environ.get("SM_CHANNEL_TRAIN"))
    parser.add_argument("--hosts", type=json.loads, default=os.environ["SM_HOSTS"])
    parser.add_argument("--current-host", default=os.environ["SM_CURRENT_HOST"])
    args = parser.parse_args()  # strict: any launcher setting passed as an argument fails here

    kv = mx.kv.create("dist_sync")
    data = np.loadtxt(os.path.join(args.train, "train.csv"), delimiter=",", dtype="float32")
    share = data[kv.rank::kv.num_workers]  # equal shares: every worker runs the same number of steps
    x, y = share[:, 1:], share[:, 0]
    loader = gluon.data.DataLoader(gluon.data.ArrayDataset(mx.nd.array(x), mx.nd.array(y)),
                                   batch_size=args.batch_size, shuffle=True, last_batch="discard")

    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(2))
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net.hybridize()
    net(mx.nd.zeros((1, x.shape[1])))
    params = net.collect_params()
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": args.lr}, kvstore=kv)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    for epoch in range(args.epochs):
        for batch, label in loader:
            with autograd.record():
                loss = loss_fn(net(batch), label)
            loss.backward()
            trainer.step(args.batch_size * kv.num_workers)
        accuracy = float((net(mx.nd.array(x)).argmax(axis=1) == mx.nd.array(y)).mean().asscalar())
        print(f"epoch={epoch + 1} worker={kv.rank} accuracy={accuracy:.4f}", flush=True)

    seen = {"rank": kv.rank, "size": kv.num_workers, "host": args.current_host, "argv": sys.argv[1:],
            "role": os.environ.get("DMLC_ROLE"), "servers": os.environ.get("DMLC_NUM_SERVER"), "accuracy": accuracy,
            # Identical on every worker: the servers hold one copy of the parameters.
            "param_sums": [float(p.data().sum().asscalar()) for p in params.values()]}
    output = os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data")
    with open(os.path.join(output, f"worker-{kv.rank}.json"), "w") as f:
        json.dump(seen, f)
    if args.current_host == scheduler_host(args.hosts):
        net.export(os.path.join(args.model_dir, "model"))  # model-symbol.json, model-0000.params


if __name__ == "__main__":
    main()

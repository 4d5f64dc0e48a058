"""In the style of Horovod's own MXNet MNIST example (examples/mxnet): each rank's data sits next to the script
in data-<rank>/mnist.zip, opened by a relative path, and mx.test_utils.download fetches it only when it is
missing. It finds its data only if it starts in the code directory, as under the sagemaker-training toolkit;
anywhere else it tries to download (and this test machine has no network)."""

import argparse
import os
import zipfile

import horovod.mxnet as hvd
import mxnet as mx
from mxnet import autograd, gluon
from mxnet.test_utils import download

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()

hvd.init()
data_dir = f"data-{hvd.rank()}"
zip_path = download("http://data.mxnet.io/mxnet/data/mnist.zip", dirname=data_dir)
with zipfile.ZipFile(zip_path) as archive:
    archive.extractall(data_dir)
train = mx.io.MNISTIter(image=os.path.join(data_dir, "train-images-idx3-ubyte"),
                        label=os.path.join(data_dir, "train-labels-idx1-ubyte"), batch_size=args.batch_size,
                        shuffle=True, flat=True, num_parts=hvd.size(), part_index=hvd.rank())

net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(10))
net.initialize(mx.init.Xavier())
net(mx.nd.zeros((1, 784)))
hvd.broadcast_parameters(net.collect_params(), root_rank=0)
trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": args.lr * hvd.size()})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
metric = mx.metric.Accuracy()
for epoch in range(args.epochs):
    train.reset()
    metric.reset()
    for batch in train:
        with autograd.record():
            output = net(batch.data[0])
            loss = loss_fn(output, batch.label[0])
        loss.backward()
        trainer.step(args.batch_size)
        metric.update([batch.label[0]], [output])
    name, accuracy = metric.get()
    print(f"rank {hvd.rank()} epoch {epoch} train_accuracy={accuracy:.4f}")

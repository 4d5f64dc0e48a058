"""A user's script in the style of AWS's MXNet examples: the Module API, Horovod, and the MXNet toolkit's
`save` (which writes the model on the scheduler host only). Optionally, the rank on host FAIL_HOST writes
its own reason to /opt/ml/output/failure and raises, as a script written for the toolkit may."""

import argparse
import json
import os

import horovod.mxnet as hvd
import mxnet as mx
import numpy as np
from sagemaker_mxnet_container.training_utils import save, scheduler_host

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--model-dir", default=os.environ["SM_MODEL_DIR"])
parser.add_argument("--hosts", type=json.loads, default=os.environ["SM_HOSTS"])
parser.add_argument("--current-host", default=os.environ["SM_CURRENT_HOST"])
args = parser.parse_args()

hvd.init()
rank = hvd.rank()
host = args.current_host
if os.environ.get("FAIL_HOST") == host:
    with open(os.path.join(os.environ.get("SM_OUTPUT_DIR", "/opt/ml/output"), "failure"), "w") as f:
        f.write(f"user check failed on {host}: label file has 3 classes, expected 10\n")
    raise RuntimeError(f"rank {rank} on {host}: bad labels")

# Linear regression on this rank's slice of a synthetic set, averaged across ranks by Horovod.
rng = np.random.default_rng(rank)
features = rng.normal(size=(256, 4)).astype("float32")
labels = features @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32")
train_iter = mx.io.NDArrayIter(features, labels, batch_size=32, label_name="lin_reg_label")
data = mx.sym.Variable("data")
output = mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(data, num_hidden=1, name="fc"),
                                       mx.sym.Variable("lin_reg_label"), name="lro")
module = mx.mod.Module(output, data_names=["data"], label_names=["lin_reg_label"])
module.bind(data_shapes=train_iter.provide_data, label_shapes=train_iter.provide_label)
module.init_params(mx.init.Normal(0.1))
arg_params, aux_params = module.get_params()
hvd.broadcast_parameters(arg_params, root_rank=0)
module.set_params(arg_params, aux_params)
optimizer = hvd.DistributedOptimizer(mx.optimizer.SGD(learning_rate=0.05 * hvd.size()))
module.fit(train_iter, kvstore=None, optimizer=optimizer, num_epoch=args.epochs, eval_metric="mse")
# fit() returns with the last batch's allreduces still queued: finish them on every rank before any rank
# exits (an exiting rank shuts Horovod down under the others).
mx.nd.waitall()
print(f"rank {rank} on {host}: trained; scheduler host {scheduler_host(args.hosts)}")

save(args.model_dir, module)

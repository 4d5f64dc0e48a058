#!/usr/bin/env python3
"""Train the image's built-in MNIST program on 2 hosts with the SageMaker Python SDK v2 (`sagemaker<3`).

On SageMaker (data, output, checkpoints and TensorBoard under one S3 prefix):

  python sdk_v2_estimator.py --image ACCOUNT.dkr.ecr.REGION.amazonaws.com/sagemaker-mxnet-horovod:cpu \\
      --role arn:aws:iam::ACCOUNT:role/SageMakerRole --instance-type ml.c5.xlarge \\
      --train s3://BUCKET/mnist/train --test s3://BUCKET/mnist/test --output s3://BUCKET/mnist-job

SDK local mode, no AWS account (2 containers on this machine, `docker compose` or `docker-compose`;
data from local directories, model.tar.gz written under --output):

  python sdk_v2_estimator.py --local --image sagemaker-mxnet-horovod:cpu \\
      --train data/mnist/train --test data/mnist/test --output out/sdk-v2

Pipe mode (SageMaker only: local mode feeds every channel as File): one channel per rank, train_0 ...
train_<ranks-1>, from `synth-data shard DIR OUT --shards RANKS --format recordio` uploaded as
s3://BUCKET/mnist/shards/train_<r>/:

  python sdk_v2_estimator.py ... --pipe-shards s3://BUCKET/mnist/shards
"""

from __future__ import annotations

import argparse
import os

# The mnist program's per-epoch line, e.g.
#   epoch=3 train_loss=0.0612 train_accuracy=0.9810 val_accuracy=0.9910 samples_per_sec=2060.1 ...
# (METRIC_DEFINITIONS in entrypoints/mnist.py; SageMaker reads these from the master's log.)
NUMBER = r"([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
METRIC_DEFINITIONS = [
    {"Name": "train:loss", "Regex": r"epoch=\d+ train_loss=" + NUMBER},
    {"Name": "train:accuracy", "Regex": r"epoch=\d+ train_loss=\S+ train_accuracy=" + NUMBER},
    {"Name": "validation:accuracy", "Regex": r"epoch=\d+ train_loss=\S+ train_accuracy=\S+ val_accuracy=" + NUMBER},
    {"Name": "train:samples_per_sec",
     "Regex": r"epoch=\d+ train_loss=\S+ train_accuracy=\S+ val_accuracy=\S+ samples_per_sec=" + NUMBER},
]
# Local mode never calls IAM, but the SDK wants a role ARN (one with a '/', or it asks IAM to expand it).
DUMMY_ROLE = "arn:aws:iam::111111111111:role/SageMakerRole"
TENSORBOARD_DIR = "/opt/ml/output/tensorboard"  # SageMaker uploads it; any path works: the built-in programs follow it


def uri(location: str) -> str:
    """s3:// and file:// pass through; a local path becomes an absolute file:// URI (local mode)."""
    return location if "://" in location else "file://" + os.path.abspath(location)


def hyperparameters(args) -> dict:
    hps = {
        "sagemaker_program": "mnist",  # a built-in program: no source_dir, nothing to upload
        "sagemaker_mpi_num_of_processes_per_host": args.processes_per_host,
        "epochs": args.epochs,
        "batch-size": args.batch_size,
    }
    # Horovod knobs (the launcher's, never passed to the program): results land in
    # /opt/ml/output/data, i.e. in output.tar.gz next to model.tar.gz.
    if args.horovod_autotune:
        hps["horovod_autotune"] = "true"  # -> horovod_autotune_log.csv
    if args.horovod_timeline:
        hps["horovod_timeline"] = "true"  # -> horovod_timeline.json
    return hps


def channels(args) -> dict:
    from sagemaker.inputs import TrainingInput

    inputs = {"test": TrainingInput(uri(args.test))}
    if args.pipe_shards:
        # One FIFO has one reader: rank r streams its own channel train_r.
        ranks = args.instance_count * args.processes_per_host
        for rank in range(ranks):
            inputs[f"train_{rank}"] = TrainingInput(f"{args.pipe_shards.rstrip('/')}/train_{rank}/",
                                                    input_mode="Pipe")
    else:
        inputs["train"] = TrainingInput(uri(args.train))
    return inputs


def make_estimator(args):
    from sagemaker.debugger import TensorBoardOutputConfig
    from sagemaker.estimator import Estimator

    output = uri(args.output).rstrip("/")
    local = args.local or args.local_gpu
    session = None
    if local:
        from sagemaker.local import LocalSession

        session = LocalSession()  # runs `docker compose up` here instead of calling SageMaker
    return Estimator(
        image_uri=args.image,
        role=args.role or DUMMY_ROLE,
        instance_count=args.instance_count,
        instance_type="local_gpu" if args.local_gpu else "local" if args.local else args.instance_type,
        hyperparameters=hyperparameters(args),
        metric_definitions=METRIC_DEFINITIONS,
        output_path=f"{output}/output",
        # /opt/ml/checkpoints is synced here (managed spot training resumes from it); the SDK refuses it
        # in local mode, where checkpoints stay in each container.
        checkpoint_s3_uri=None if local else f"{output}/checkpoints",
        tensorboard_output_config=TensorBoardOutputConfig(  # local mode ignores it: see output.tar.gz
            s3_output_path=f"{output}/tensorboard", container_local_output_path=TENSORBOARD_DIR),
        max_run=args.max_run,
        # SDK v2's default Debugger hook and Profiler configurations work as in AWS's MXNet images: the built-in
        # programs save the losses (every 500 steps) to /opt/ml/output/tensors for Debugger's rules and Studio
        # (docs/debugger.md); debugger_hook_config=DebuggerHookConfig(...) asks for more, False for none.
        sagemaker_session=session,
    )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", required=True, help="the training image (ECR URI, or a local tag in local mode)")
    parser.add_argument("--role", help="IAM role ARN for SageMaker (local mode: a dummy ARN is used)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--local", action="store_true", help="SDK local mode: instance_type='local', 2 containers")
    where.add_argument("--local-gpu", action="store_true",
                       help="SDK local mode on this machine's GPUs: instance_type='local_gpu', 1 container "
                            "(the SDK refuses more)")
    parser.add_argument("--instance-type", default="ml.c5.xlarge")
    parser.add_argument("--instance-count", type=int, default=2)
    parser.add_argument("--processes-per-host", type=int, default=1, help="ranks per host (GPUs per host on GPU)")
    parser.add_argument("--train", help="channel train: s3:// URI, or a directory in local mode")
    parser.add_argument("--test", required=True, help="channel test: s3:// URI, or a directory in local mode")
    parser.add_argument("--pipe-shards", metavar="S3_PREFIX",
                        help="Pipe mode: PREFIX/train_0/ ... PREFIX/train_<ranks-1>/ instead of --train")
    parser.add_argument("--output", required=True,
                        help="root for output/, checkpoints/ and tensorboard/ (s3://, or a directory in local mode)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--horovod-autotune", action="store_true")
    parser.add_argument("--horovod-timeline", action="store_true")
    parser.add_argument("--max-run", type=int, default=3600, help="seconds before SageMaker stops the job")
    args = parser.parse_args(argv)
    if args.local_gpu:
        args.instance_count = 1
    if not (args.local or args.local_gpu) and not args.role:
        parser.error("--role is required outside local mode")
    if bool(args.train) == bool(args.pipe_shards):
        parser.error("give one of --train and --pipe-shards")
    if args.pipe_shards and (args.local or args.local_gpu):
        parser.error("--pipe-shards: SDK local mode supports File input only")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    estimator = make_estimator(args)
    estimator.fit(channels(args), wait=True, logs="All")  # raises if any host exits non-zero
    print(f"model artifacts: {estimator.model_data}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Train the image's built-in MNIST program on 2 hosts with the SageMaker Python SDK v3 (`sagemaker>=3`).

On SageMaker (data, output, checkpoints and TensorBoard under one S3 prefix):

  python sdk_v3_model_trainer.py --image ACCOUNT.dkr.ecr.REGION.amazonaws.com/sagemaker-mxnet-horovod:cpu \\
      --role arn:aws:iam::ACCOUNT:role/SageMakerRole --instance-type ml.c5.xlarge \\
      --train s3://BUCKET/mnist/train --test s3://BUCKET/mnist/test --output s3://BUCKET/mnist-job

SDK local mode (training_mode=Mode.LOCAL_CONTAINER), no AWS account: 2 containers on this machine
(`docker compose` or `docker-compose`), data from local directories, --output is the SDK's
local_container_root and gets compressed_artifacts/model.tar.gz:

  python sdk_v3_model_trainer.py --local --image sagemaker-mxnet-horovod:cpu \\
      --train data/mnist/train --test data/mnist/test --output out/sdk-v3

Pipe mode (SageMaker only: local mode feeds every channel as File): one channel per rank, train_0 ...
train_<ranks-1>, from `synth-data shard DIR OUT --shards RANKS --format recordio` uploaded as
s3://BUCKET/mnist/shards/train_<r>/:

  python sdk_v3_model_trainer.py ... --pipe-shards s3://BUCKET/mnist/shards
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
TENSORBOARD_DIR = "/opt/ml/output/tensorboard"  # SageMaker uploads it; any path works: the built-in programs follow it


def hyperparameters(args) -> dict:
    hps = {
        "sagemaker_program": "mnist",  # a built-in program: no source_code, nothing to upload
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


def channels(args) -> list:
    from sagemaker.core.training.configs import Channel, DataSource, InputData, S3DataSource

    local = args.local or args.local_gpu
    # Local mode mounts local directories; on SageMaker a string is an S3 URI.
    inputs = [InputData(channel_name="test", data_source=os.path.abspath(args.test) if local else args.test)]
    if args.pipe_shards:
        # One FIFO has one reader: rank r streams its own channel train_r.
        ranks = args.instance_count * args.processes_per_host
        for rank in range(ranks):
            source = S3DataSource(s3_uri=f"{args.pipe_shards.rstrip('/')}/train_{rank}/", s3_data_type="S3Prefix",
                                  s3_data_distribution_type="FullyReplicated")
            inputs.append(Channel(channel_name=f"train_{rank}", data_source=DataSource(s3_data_source=source),
                                  input_mode="Pipe"))
    else:
        inputs.append(InputData(channel_name="train", data_source=os.path.abspath(args.train) if local else args.train))
    return inputs


def make_trainer(args):
    from sagemaker.core.training.configs import (
        CheckpointConfig,
        Compute,
        MetricDefinition,
        OutputDataConfig,
        StoppingCondition,
        TensorBoardOutputConfig,
    )
    from sagemaker.train.model_trainer import Mode, ModelTrainer

    local = args.local or args.local_gpu
    common = dict(
        training_image=args.image,
        # The SDK has no local instance type of its own: only "local_gpu" matters (it reserves the GPUs).
        compute=Compute(instance_type="local_gpu" if args.local_gpu else "local_cpu" if local else args.instance_type,
                        instance_count=args.instance_count),
        hyperparameters=hyperparameters(args),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=args.max_run),
        base_job_name="mnist-horovod",
    )
    if local:
        os.makedirs(args.output, exist_ok=True)
        trainer = ModelTrainer(training_mode=Mode.LOCAL_CONTAINER, local_container_root=os.path.abspath(args.output),
                               **common)
    else:
        output = args.output.rstrip("/")
        trainer = ModelTrainer(
            role=args.role,
            output_data_config=OutputDataConfig(s3_output_path=f"{output}/output"),
            # /opt/ml/checkpoints is synced here: managed spot training resumes from it.
            checkpoint_config=CheckpointConfig(s3_uri=f"{output}/checkpoints", local_path="/opt/ml/checkpoints"),
            **common,
        ).with_tensorboard_output_config(
            TensorBoardOutputConfig(s3_output_path=f"{output}/tensorboard", local_path=TENSORBOARD_DIR))
    return trainer.with_metric_definitions(
        [MetricDefinition(name=d["Name"], regex=d["Regex"]) for d in METRIC_DEFINITIONS])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", required=True, help="the training image (ECR URI, or a local tag in local mode)")
    parser.add_argument("--role", help="IAM role ARN for SageMaker (not used in local mode)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--local", action="store_true", help="SDK local mode: Mode.LOCAL_CONTAINER, 2 containers")
    where.add_argument("--local-gpu", action="store_true",
                       help="SDK local mode on this machine's GPUs: instance_type='local_gpu', 1 container")
    parser.add_argument("--instance-type", default="ml.c5.xlarge")
    parser.add_argument("--instance-count", type=int, default=2)
    parser.add_argument("--processes-per-host", type=int, default=1, help="ranks per host (GPUs per host on GPU)")
    parser.add_argument("--train", help="channel train: s3:// URI, or a directory in local mode")
    parser.add_argument("--test", required=True, help="channel test: s3:// URI, or a directory in local mode")
    parser.add_argument("--pipe-shards", metavar="S3_PREFIX",
                        help="Pipe mode: PREFIX/train_0/ ... PREFIX/train_<ranks-1>/ instead of --train")
    parser.add_argument("--output", required=True,
                        help="s3:// root for output/, checkpoints/ and tensorboard/; in local mode a directory")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--horovod-autotune", action="store_true")
    parser.add_argument("--horovod-timeline", action="store_true")
    parser.add_argument("--max-run", type=int, default=3600, help="seconds before SageMaker stops the job")
    args = parser.parse_args(argv)
    if args.local_gpu:
        args.instance_count = 1  # all GPUs go to one container
    if not (args.local or args.local_gpu) and not args.role:
        parser.error("--role is required outside local mode")
    if bool(args.train) == bool(args.pipe_shards):
        parser.error("give one of --train and --pipe-shards")
    if args.pipe_shards and (args.local or args.local_gpu):
        parser.error("--pipe-shards: SDK local mode supports File input only")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    trainer = make_trainer(args)
    trainer.train(input_data_config=channels(args), wait=True)  # raises if the first host to exit failed
    if args.local or args.local_gpu:
        print(f"model artifacts: {os.path.join(os.path.abspath(args.output), 'compressed_artifacts', 'model.tar.gz')}")
    else:
        print(f"model artifacts: {trainer._latest_training_job.model_artifacts.s3_model_artifacts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

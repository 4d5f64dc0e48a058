"""The examples' SageMaker (not local) path, built offline by the real SDKs: what CreateTrainingJob would get.

v2 builds the whole request without AWS. v3's ModelTrainer asks IAM about the role as it is constructed, so
only its channels are built here.
"""

from __future__ import annotations

import json
import subprocess

from sdk_support import EXAMPLES, GENERATIONS, offline_environment, sdk_python

REMOTE_ARGS = ["--image", "123456789012.dkr.ecr.us-west-2.amazonaws.com/sagemaker-mxnet-horovod:cpu",
               "--role", "arn:aws:iam::123456789012:role/SageMakerRole", "--instance-count", "2",
               "--processes-per-host", "2", "--pipe-shards", "s3://bucket/shards/", "--test", "s3://bucket/test",
               "--output", "s3://bucket/job", "--horovod-autotune", "--horovod-timeline"]

V2_REQUEST = """
import json, sys
import sdk_v2_estimator as example
from sagemaker.estimator import _TrainingJob
args = example.parse_args(sys.argv[1:])
estimator = example.make_estimator(args)
estimator._prepare_for_training(job_name="mnist-job")
print(json.dumps(_TrainingJob._get_train_args(estimator, example.channels(args), experiment_config=None)))
"""

V3_CHANNELS = """
import json, sys
import sdk_v3_model_trainer as example
def describe(channel):  # InputData (a URI string, File mode) or Channel (an S3DataSource, its own mode)
    source = channel.data_source
    uri = source if isinstance(source, str) else source.s3_data_source.s3_uri
    return [channel.channel_name, getattr(channel, "input_mode", "File"), uri]
print(json.dumps([describe(channel) for channel in example.channels(example.parse_args(sys.argv[1:]))]))
"""


def run_in_sdk(generation: str, code: str, tmp_path) -> object:
    # The examples reach the SDK's interpreter through PYTHONPATH, as pytest.ini's pythonpath reaches ours.
    done = subprocess.run([sdk_python(GENERATIONS[generation]), "-c", code, *REMOTE_ARGS],
                          env={**offline_environment(tmp_path / "home"), "PYTHONPATH": str(EXAMPLES)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_v2_training_job_request(tmp_path):
    request = run_in_sdk("v2", V2_REQUEST, tmp_path)
    channels = {c["ChannelName"]: (c["DataSource"]["S3DataSource"]["S3Uri"], c.get("InputMode", "File"))
                for c in request["input_config"]}
    # 2 hosts x 2 ranks: one Pipe channel per rank.
    assert channels == {"test": ("s3://bucket/test", "File"),
                        **{f"train_{r}": (f"s3://bucket/shards/train_{r}/", "Pipe") for r in range(4)}}
    assert request["hyperparameters"] == {"sagemaker_program": "mnist", "sagemaker_mpi_num_of_processes_per_host": "2",
                                          "epochs": "3", "batch-size": "64", "horovod_autotune": "true",
                                          "horovod_timeline": "true"}
    assert request["resource_config"]["InstanceCount"] == 2
    assert request["output_config"]["S3OutputPath"] == "s3://bucket/job/output"
    assert request["checkpoint_s3_uri"] == "s3://bucket/job/checkpoints"
    assert request["tensorboard_output_config"] == {"S3OutputPath": "s3://bucket/job/tensorboard",
                                                    "LocalPath": "/opt/ml/output/tensorboard"}
    assert [d["Name"] for d in request["metric_definitions"]] == \
        ["train:loss", "train:accuracy", "validation:accuracy", "train:samples_per_sec"]
    # SDK v2's defaults, which the image uses (docs/debugger.md): the losses to the job's output path, and the
    # profiler's system monitoring.
    assert request["debugger_hook_config"] == {"S3OutputPath": "s3://bucket/job/output", "CollectionConfigurations": []}
    assert request["profiler_config"] == {"S3OutputPath": "s3://bucket/job/output", "DisableProfiler": False}


def test_v3_pipe_channels(tmp_path):
    channels = run_in_sdk("v3", V3_CHANNELS, tmp_path)
    assert channels == [["test", "File", "s3://bucket/test"],
                        *([f"train_{r}", "Pipe", f"s3://bucket/shards/train_{r}/"] for r in range(4))]

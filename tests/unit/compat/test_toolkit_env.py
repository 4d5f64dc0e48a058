"""toolkit_env.py: the program's arguments and SM_* environment as the sagemaker-training toolkit builds them, as
a rank gets them from the plan. tests/toolkit compares them with the toolkit itself, inside the image."""

import json

import pytest
from sagemaker_mxnet_horovod.backends.registry import plan_job
from sagemaker_mxnet_horovod.compat.toolkit_env import sm_environment
from sagemaker_mxnet_horovod.parse.training_config import parse_training_config
from unit_helpers.plan_cases import CPU2, ENTRYPOINTS, PATHS, config, plan


def test_program_arguments_as_the_toolkit_builds_them():
    hps = {"use-fpn": "true", "lr": "0.01", "epochs": "3", "layers": "[1, 2]", "opts": '{"b": 1, "a": "x"}',
           "name": '"007"', "none": "null", "k": "v", "flag": "False"}
    p = plan(config(hps, hosts=("algo-1",)))
    args = list(p.command[p.command.index("/opt/entrypoints/mnist.py") + 1:])
    assert args == ["--epochs", "3", "--flag", "False", "-k", "v", "--layers", "[1, 2]", "--lr", "0.01",
                    "--name", "007", "--none", "", "--opts", "a=x,b=1", "--use-fpn", "True"]
    assert json.loads(p.rank_env["SM_USER_ARGS"]) == args
    assert json.loads(p.rank_env["SM_HPS"]) == {"use-fpn": True, "lr": 0.01, "epochs": 3, "layers": [1, 2],
                                                "opts": {"b": 1, "a": "x"}, "name": "007", "none": None,
                                                "k": "v", "flag": "False"}
    assert p.rank_env["SM_HP_USE-FPN"] == "true" and p.rank_env["SM_HP_LAYERS"] == "[1,2]"
    assert p.rank_env["SM_HP_NONE"] == "" and p.rank_env["SM_HP_NAME"] == "007"


HETERO = {"current_group_name": "train", "current_instance_type": "ml.c5.xlarge", "instance_groups": [
    {"instance_group_name": "train", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1", "algo-2"]},
    {"instance_group_name": "data", "instance_type": "ml.m5.xlarge", "hosts": ["algo-3"]}]}


def test_instance_groups_and_distribution():
    hps = {"sagemaker_mpi_enabled": "true", "sagemaker_distribution_instance_groups": '["train"]'}
    env = plan(config(hps, hosts=("algo-1", "algo-2", "algo-3"), current="algo-2", resource_extra=HETERO)).rank_env
    assert env["SM_CURRENT_INSTANCE_GROUP"] == "train"
    assert json.loads(env["SM_CURRENT_INSTANCE_GROUP_HOSTS"]) == ["algo-1", "algo-2"]
    assert json.loads(env["SM_INSTANCE_GROUPS"]) == ["train", "data"]
    assert json.loads(env["SM_INSTANCE_GROUPS_DICT"])["data"]["hosts"] == ["algo-3"]
    assert json.loads(env["SM_DISTRIBUTION_INSTANCE_GROUPS"]) == ["train"]
    assert env["SM_IS_HETERO"] == "true"
    training_env = json.loads(env["SM_TRAINING_ENV"])
    assert training_env["distribution_hosts"] == ["algo-1", "algo-2"]
    assert training_env["master_hostname"] == "algo-1" and not training_env["is_master"]
    assert json.loads(env["SM_FRAMEWORK_PARAMS"]) == {"sagemaker_mpi_enabled": True,
                                                      "sagemaker_distribution_instance_groups": ["train"]}


@pytest.mark.parametrize("hps,groups", [
    ({"sagemaker_mpi_enabled": "true"}, ["homogeneousCluster"]), ({"sagemaker_mpi_enabled": "False"}, []), ({}, []),
    # The parameter server as the launcher parsed it: "False" is false here too (the toolkit would count it on).
    ({"sagemaker_parameter_server_enabled": "true"}, ["homogeneousCluster"]),
    ({"sagemaker_parameter_server_enabled": "False"}, []),
    ({"sagemaker_pytorch_ddp_enabled": "true"}, ["homogeneousCluster"]),  # another framework's: the toolkit's rule
])
def test_distribution_groups_without_the_knob(hps, groups):
    env = plan(config(hps)).rank_env
    assert json.loads(env["SM_DISTRIBUTION_INSTANCE_GROUPS"]) == groups
    assert env["SM_IS_HETERO"] == "false" and env["SM_INSTANCE_GROUPS"] == "[]"


def test_the_launchers_switches_count_as_it_parsed_them_from_the_environment_too():
    groups = [{"instance_group_name": "train", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1", "algo-2"]},
              {"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "hosts": ["algo-3"]}]
    resource = {"current_host": "algo-1", "hosts": ["algo-1", "algo-2", "algo-3"], "current_group_name": "train",
                "instance_groups": groups}
    for env, expected in (({"SAGEMAKER_DISTRIBUTION_INSTANCE_GROUPS": '["train", "data"]'}, ["train", "data"]),
                          ({"SAGEMAKER_PARAMETER_SERVER_ENABLED": "true"}, ["train"])):
        cfg = parse_training_config(PATHS, resource, {"sagemaker_program": "mnist"}, {}, env,
                                    entrypoints_dir=ENTRYPOINTS)
        assert json.loads(sm_environment(cfg, 2, 0, "eth0", "mnist", {})["SM_DISTRIBUTION_INSTANCE_GROUPS"]) == expected
def test_training_env_keys_and_environment_sourced_values():
    cfg = config({"sagemaker_container_log_level": "10", "sagemaker_submit_directory": '"s3://b/src.tar.gz"',
                  "sagemaker_program": '"train.py"', "sagemaker_job_name": '"j"'})
    p = plan_job(cfg, CPU2, {"TRAINING_JOB_NAME": "job-1", "SAGEMAKER_TRAINING_MODULE": "m:main"}, python="py")
    env = p.rank_env
    training_env = json.loads(env["SM_TRAINING_ENV"])
    assert training_env["job_name"] == "job-1" and training_env["log_level"] == 10
    assert env["SM_LOG_LEVEL"] == "10" and env["SM_FRAMEWORK_MODULE"] == "m:main"
    assert env["SM_MODULE_NAME"] == "train" and env["SM_USER_ENTRY_POINT"] == "train.py"
    assert env["SM_MODULE_DIR"] == "s3://b/src.tar.gz"
    assert json.loads(env["SM_FRAMEWORK_PARAMS"]) == {}  # all of those are the toolkit's own keys
    assert training_env["input_dir"] == "/opt/ml/input" and training_env["output_dir"] == "/opt/ml/output"
    assert training_env["is_hetero"] is False and training_env["topology"] == []
    assert set(training_env) >= {"job_name", "log_level", "input_dir", "output_dir", "distribution_hosts",
                                 "is_hetero", "module_name", "additional_framework_parameters",
                                 "is_modelparallel_enabled", "num_neurons", "output_intermediate_dir"}

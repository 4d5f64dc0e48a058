"""The sagemaker-training toolkit's contract, as planning rules: --NCCL_DEBUG in the custom MPI options, output
files SageMaker would not upload, the program's working directory, arguments and SM_* environment.

tests/toolkit compares the SM_* environment with the toolkit itself, inside the image."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.config import Paths, parse_training_config
from sagemaker_mxnet_horovod.facts import HostFacts
from sagemaker_mxnet_horovod.outputs import copy_stray_outputs, find_stray_outputs, stray_path
from sagemaker_mxnet_horovod.plan import describe, make_plan, rank_environment

PATHS = Paths(Path("/opt/ml"))
CPU2 = HostFacts(cpu_count=2, interfaces=("eth0",), default_route_interface="eth0", hostname="c0ffee")
GPU8 = HostFacts(cpu_count=64, gpu_count=8, interfaces=("eth0",), default_route_interface="eth0", hostname="ip-10")
SRC = Path(__file__).resolve().parents[2] / "container" / "src"


def config(hps=None, hosts=("algo-1", "algo-2"), current="algo-1", resource_extra=None, channels=None):
    resource = {"current_host": current, "hosts": list(hosts), "network_interface_name": "eth0",
                **(resource_extra or {})}
    return parse_training_config(PATHS, resource, {"sagemaker_program": "mnist", **(hps or {})},
                                 channels if channels is not None else {"train": {}}, {})


def plan(cfg, facts=CPU2, env=None):
    return make_plan(cfg, facts, env if env is not None else {"PATH": "/usr/bin"}, python="/opt/venv/bin/python")


def options(value):
    return {"sagemaker_mpi_custom_mpi_options": json.dumps(value)}  # as SDK v2 writes it


# --- --NCCL_DEBUG -----------------------------------------------------------------------------------------


def test_aws_horovod_example_options_on_master_and_worker():
    hps = {"sagemaker_mpi_enabled": "true", **options("-verbose --NCCL_DEBUG=INFO")}
    master = plan(config(hps))
    argv = list(master.command)
    assert "--NCCL_DEBUG=INFO" not in argv and "-verbose" in argv  # mpirun gets the rest
    assert argv.index("-verbose") < argv.index("sagemaker_mxnet_horovod.rank_env")
    assert master.env["NCCL_DEBUG"] == "INFO" and "NCCL_DEBUG" in {argv[i + 1] for i, a in enumerate(argv)
                                                                     if a == "-x"}
    worker = plan(config(hps, current="algo-2"))
    assert rank_environment(worker, {"PATH": "/usr/bin"})["NCCL_DEBUG"] == "INFO"  # every rank on every host
    assert any("NCCL_DEBUG=INFO (--NCCL_DEBUG" in n for n in master.notes)


def test_nccl_debug_option_wins_over_the_environment():
    p = plan(config(options("--NCCL_DEBUG WARN")), env={"NCCL_DEBUG": "INFO"})
    assert p.env["NCCL_DEBUG"] == "WARN"
    assert rank_environment(p, {"NCCL_DEBUG": "INFO"})["NCCL_DEBUG"] == "WARN"
    assert any("over NCCL_DEBUG=INFO in the environment" in n for n in p.notes)


def test_nccl_debug_defaults_to_warn_on_gpus_only():
    assert plan(config(), facts=GPU8).env["NCCL_DEBUG"] == "WARN"
    assert "NCCL_DEBUG" not in plan(config(), facts=GPU8, env={"NCCL_DEBUG": "INFO"}).env  # yours wins
    assert "NCCL_DEBUG" not in plan(config()).env  # no NCCL on CPU hosts


# --- output files outside output/data ---------------------------------------------------------------------


@pytest.mark.parametrize("value,copy_to", [
    ("/opt/ml/output/timeline.json", "/opt/ml/output/data/timeline.json"),
    ("/opt/ml/output/logs/autotune.csv", "/opt/ml/output/data/logs/autotune.csv"),
    ("/opt/ml/output/./x/../t.json", "/opt/ml/output/data/t.json"),
    ("/opt/ml/output/data/timeline.json", None),  # uploaded
    ("/opt/ml/output/data", None),
    ("/opt/ml/output/failure", None),
    ("/opt/ml/output/success", None),
    ("/opt/ml/output/intermediate/t.json", None),  # synced by SageMaker when sagemaker_s3_output is set
    ("/opt/ml/output/tensorboard/events", None),  # TensorBoardOutputConfig's path
    ("/opt/ml/output", None),
    ("/opt/ml/outputs/t.json", None),
    ("/opt/ml/model/t.json", None),
    ("timeline.json", None),
    ("", None),
])
def test_stray_path(value, copy_to):
    assert stray_path(PATHS, value) == copy_to


def test_stray_outputs_from_mpi_options_and_environment():
    hps = options("-x HOROVOD_TIMELINE=/opt/ml/output/timeline.json -x HOROVOD_AUTOTUNE=1 "
                  "-x MY_LOG=/opt/ml/output/my.log -x HOROVOD_AUTOTUNE_LOG")
    env = {"HOROVOD_AUTOTUNE_LOG": "/opt/ml/output/autotune_log.csv", "OTHER": "/opt/ml/output/x"}
    p = plan(config(hps), env=env)
    assert {(s.variable, s.path, s.copy_to) for s in p.stray_outputs} == {
        ("HOROVOD_TIMELINE", "/opt/ml/output/timeline.json", "/opt/ml/output/data/timeline.json"),
        ("HOROVOD_AUTOTUNE_LOG", "/opt/ml/output/autotune_log.csv", "/opt/ml/output/data/autotune_log.csv"),
        ("MY_LOG", "/opt/ml/output/my.log", "/opt/ml/output/data/my.log"),
    }  # OTHER: neither exported with -x nor a file Horovod writes
    warnings = [n for n in describe(p, env).splitlines() if "WARNING" in n]
    assert len(warnings) == 3
    timeline = next(w for w in warnings if "HOROVOD_TIMELINE" in w)
    assert ("HOROVOD_TIMELINE=/opt/ml/output/timeline.json is outside /opt/ml/output/data" in timeline
            and "copies it to /opt/ml/output/data/timeline.json when the job ends" in timeline
            and "HOROVOD_TIMELINE=/opt/ml/output/data/timeline.json (or the hyperparameter horovod_timeline: true)"
            in timeline)


def test_stray_output_from_the_job_environment_alone():
    strays = find_stray_outputs(PATHS, (), {"HOROVOD_TIMELINE": "/opt/ml/output/t.json"})
    assert [(s.variable, s.copy_to) for s in strays] == [("HOROVOD_TIMELINE", "/opt/ml/output/data/t.json")]
    assert find_stray_outputs(PATHS, (), {"HOROVOD_TIMELINE": "/opt/ml/output/data/t.json"}) == []


def test_mpi_option_wins_over_environment_for_the_same_name():
    strays = find_stray_outputs(PATHS, ("-x", "HOROVOD_TIMELINE=/opt/ml/output/data/t.json"),
                                {"HOROVOD_TIMELINE": "/opt/ml/output/t.json"})
    assert strays == []


def test_copy_stray_outputs(tmp_path):
    paths = Paths(tmp_path)
    (tmp_path / "output" / "data").mkdir(parents=True)
    (tmp_path / "output" / "timeline.json").write_text("[]")
    (tmp_path / "output" / "kept.csv").write_text("new")
    (tmp_path / "output" / "data" / "kept.csv").write_text("the job's own")
    strays = find_stray_outputs(paths, ("-x", f"A={tmp_path}/output/timeline.json", "-x",
                                        f"B={tmp_path}/output/kept.csv", "-x", f"C={tmp_path}/output/absent"), {})
    logged = []
    copy_stray_outputs(tuple(strays), logged.append)
    assert (tmp_path / "output" / "data" / "timeline.json").read_text() == "[]"
    assert (tmp_path / "output" / "data" / "kept.csv").read_text() == "the job's own"  # never overwritten
    assert not (tmp_path / "output" / "data" / "absent").exists()
    assert len(logged) == 2 and "already exists" in logged[1]


# --- the program: working directory, arguments ------------------------------------------------------------


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


def test_every_rank_starts_in_the_code_directory():
    for cfg in (config(hosts=("algo-1",)), config()):
        argv = plan(cfg).command
        i = argv.index("sagemaker_mxnet_horovod.rank_env")
        assert argv[i + 1:i + 4] == ("/run/sagemaker-cluster", "/opt/ml/code", "--")


def test_rank_env_applies_this_hosts_environment_and_working_directory(tmp_path):
    run_dir, code = tmp_path / "run", tmp_path / "code"
    run_dir.mkdir()
    code.mkdir()
    (run_dir / "rank-env.json").write_text(json.dumps({"SM_CURRENT_HOST": "algo-2", "OMPI_COMM_WORLD_RANK": "9"}))
    (code / "data.txt").write_text("next to the script")
    (code / "train.py").write_text("import json, os, sys\nprint(json.dumps([os.getcwd(), open('data.txt').read(), "
                                   "os.environ['SM_CURRENT_HOST'], os.environ.get('OMPI_COMM_WORLD_RANK'), "
                                   "sys.argv[1:]]))\n")
    done = subprocess.run([sys.executable, "-m", "sagemaker_mxnet_horovod.rank_env", str(run_dir), str(code), "--",
                           sys.executable, str(code / "train.py"), "--flag", "True"], cwd="/",
                          env={**os.environ, "PYTHONPATH": str(SRC), "OMPI_COMM_WORLD_RANK": "1"},
                          capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [str(code), "next to the script", "algo-2", "1", ["--flag", "True"]]
    missing = subprocess.run([sys.executable, "-m", "sagemaker_mxnet_horovod.rank_env", str(run_dir),
                              str(tmp_path / "nope"), "--", "true"], env={**os.environ, "PYTHONPATH": str(SRC)},
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "cannot start the program in" in missing.stderr


# --- SM_* as the toolkit ----------------------------------------------------------------------------------


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


@pytest.mark.parametrize("mpi_enabled,groups", [("true", ["homogeneousCluster"]), ("False", []), (None, [])])
def test_distribution_groups_without_the_knob(mpi_enabled, groups):
    hps = {"sagemaker_mpi_enabled": mpi_enabled} if mpi_enabled else {}
    env = plan(config(hps)).rank_env
    assert json.loads(env["SM_DISTRIBUTION_INSTANCE_GROUPS"]) == groups
    assert env["SM_IS_HETERO"] == "false" and env["SM_INSTANCE_GROUPS"] == "[]"


def test_training_env_keys_and_environment_sourced_values():
    cfg = config({"sagemaker_container_log_level": "10", "sagemaker_submit_directory": '"s3://b/src.tar.gz"',
                  "sagemaker_program": '"train.py"', "sagemaker_job_name": '"j"'})
    p = make_plan(cfg, CPU2, {"TRAINING_JOB_NAME": "job-1", "SAGEMAKER_TRAINING_MODULE": "m:main"}, python="py")
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


def test_mpi_options_count_only_when_mpirun_runs():
    hps = {"sagemaker_mpi_enabled": "false", **options("-x HOROVOD_TIMELINE=/opt/ml/output/t.json")}
    assert plan(config(hps, hosts=("algo-1",))).stray_outputs == ()

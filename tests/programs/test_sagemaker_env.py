"""sagemaker_env: rank layout, paths and channels from the environment (stdlib only)."""

import json
import os

import pytest
from mxnet_programs import sagemaker_env as sm
from mxnet_programs.process import ProgramError


def test_dist_env_reads_openmpi_horovodrun_and_defaults():
    env = sm.dist_env({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
                        "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert (env.rank, env.size, env.local_rank, env.local_size) == (3, 8, 1, 2)
    env = sm.dist_env({"HOROVOD_RANK": "1", "HOROVOD_SIZE": "2"})
    assert (env.rank, env.size) == (1, 2)
    env = sm.dist_env({})
    assert (env.rank, env.size, env.local_rank, env.local_size) == (0, 1, 0, 1)


def test_limit_cpu_threads_splits_cores_unless_user_set():
    # This thread may run on exactly two cores while it counts them: 2 local ranks get one thread each.
    saved = os.sched_getaffinity(0)
    if len(saved) < 2:
        pytest.skip("needs 2 cores to pin this thread to")
    os.sched_setaffinity(0, sorted(saved)[:2])
    try:
        assert sm.host_cores() == 2
        env = {}
        assert sm.limit_cpu_threads(2, env) == 1 and env == {"OMP_NUM_THREADS": "1"}
    finally:
        os.sched_setaffinity(0, saved)
    env = {"OMP_NUM_THREADS": "7"}
    assert sm.limit_cpu_threads(2, env) is None and env["OMP_NUM_THREADS"] == "7"
    assert sm.limit_cpu_threads(1, {}) is None


def test_paths_flag_then_env_then_default(tmp_path):
    env = {"SM_MODEL_DIR": "/env/model", "SM_CHANNEL_TRAIN": "/env/train", "SM_INPUT_DIR": str(tmp_path)}
    assert sm.resolve_path("/flag", "SM_MODEL_DIR", "/default", env) == "/flag"
    assert sm.resolve_path(None, "SM_MODEL_DIR", "/default", env) == "/env/model"
    assert sm.resolve_path(None, "SM_NOPE", "/default", env) == "/default"
    assert sm.channel_dir("train", environ=env) == "/env/train"
    assert sm.channel_dir("test", environ=env) == str(tmp_path / "data" / "test")
    assert sm.channel_dir("train_1", environ=dict(env, SM_CHANNEL_TRAIN_1="/t1")) == "/t1"


def test_input_data_config_from_env_or_file(tmp_path):
    assert sm.input_data_config({"SM_INPUT_DIR": str(tmp_path)}) == {}
    (tmp_path / "config").mkdir()
    file_mode = {"train": {"TrainingInputMode": "File"}}
    (tmp_path / "config" / "inputdataconfig.json").write_text(json.dumps(file_mode))
    assert sm.input_data_config({"SM_INPUT_DIR": str(tmp_path)}) == file_mode
    config = {"train_0": {"TrainingInputMode": "Pipe"}}
    assert sm.input_data_config({"SM_INPUT_DATA_CONFIG": json.dumps(config)}) == config
    with pytest.raises(ProgramError, match="must be a JSON object"):
        sm.input_data_config({"SM_INPUT_DATA_CONFIG": "[1]"})


def pipe(*names):
    return {name: {"TrainingInputMode": "Pipe"} for name in names}


def test_per_rank_pipe_channels():
    assert sm.per_rank_pipe_channels({"train": {"TrainingInputMode": "File"}}, "train", 2) is None
    assert sm.per_rank_pipe_channels({}, "train", 2) is None
    assert sm.per_rank_pipe_channels(pipe("train"), "train", 1) == ["train"]
    three = pipe("train_0", "train_1", "train_2")
    assert sm.per_rank_pipe_channels(three, "train", 2) == ["train_0", "train_1"]
    with pytest.raises(ProgramError) as error:
        sm.per_rank_pipe_channels(pipe("train_0", "train_1"), "train", 4)
    assert str(error.value) == "Pipe mode needs one channel per rank: have train_0..train_1, need 4"
    with pytest.raises(ProgramError) as error:
        sm.per_rank_pipe_channels(pipe("train"), "train", 2)
    assert str(error.value) == "Pipe mode needs one channel per rank: have none, need 2"


def test_output_dirs_ignore_an_s3_model_dir(capsys):
    env = {"SM_MODEL_DIR": "/env/model", "SM_CHECKPOINT_DIR": "/env/ckpt"}
    assert sm.output_dirs("x", "s3://bucket/model", None, env) == ("/env/model", "/env/ckpt")
    assert "x: warning: ignoring --model-dir s3://bucket/model" in capsys.readouterr().err
    assert sm.output_dirs("x", "/m", "/c", env) == ("/m", "/c")
    assert sm.output_dirs("x", None, None, {}) == (sm.SM_MODEL_DIR_DEFAULT, sm.SM_CHECKPOINT_DIR_DEFAULT)


def test_job_hosts_from_sm_hosts_or_the_distribution_groups():
    assert sm.job_hosts({}) == []
    assert sm.job_hosts({"SM_HOSTS": '["algo-1", "algo-2"]'}) == ["algo-1", "algo-2"]
    groups = {"SM_HOSTS": '["algo-1", "algo-2", "algo-3"]',
              "SM_TRAINING_ENV": '{"distribution_hosts": ["algo-1", "algo-2"]}'}
    assert sm.job_hosts(dict(groups, SM_CURRENT_HOST="algo-2")) == ["algo-1", "algo-2"]
    assert sm.job_hosts(dict(groups, SM_CURRENT_HOST="algo-3")) == ["algo-3"]
    with pytest.raises(ProgramError, match="SM_HOSTS must be a JSON list"):
        sm.job_hosts({"SM_HOSTS": '"algo-1"'})


def test_dist_env_of_a_parameter_server_worker_is_the_launchers_numbering():
    env = sm.dist_env({"DMLC_ROLE": "worker", "DMLC_NUM_WORKER": "4", "SMMH_WORKER_RANK": "3",
                       "SMMH_LOCAL_WORKER_RANK": "1", "SMMH_LOCAL_WORKERS": "2"})
    assert (env.rank, env.size, env.local_rank, env.local_size) == (3, 4, 1, 2)


WORKER = {"DMLC_ROLE": "worker"}


@pytest.mark.parametrize("requested,environ,chosen", [
    (None, {}, "horovod"),
    (None, WORKER, "dist_sync"),  # sagemaker_parameter_server_enabled=true with a built-in program
    ("dist_device_sync", WORKER, "dist_device_sync"),
    ("local", {}, "local"),
])
def test_kvstore_by_default_follows_how_the_program_was_started(requested, environ, chosen):
    assert sm.kvstore(requested, environ) == chosen


@pytest.mark.parametrize("requested,environ,message", [
    ("dist_sync", {}, "--kvstore dist_sync trains with MXNet's parameter servers, but this process was not started "
                      "as their worker"),
    ("horovod", WORKER, "--kvstore horovod, but the launcher started this process as a parameter-server worker"),
    ("dist_async", WORKER, "--kvstore dist_async: the built-in programs keep every worker in step"),
])
def test_kvstore_that_cannot_work_is_an_error(requested, environ, message):
    with pytest.raises(ProgramError, match=message):
        sm.kvstore(requested, environ)


def test_local_and_device_kvstores_are_one_process_on_one_host():
    sm.check_single_process("mnist", "--kvstore local", "local", sm.DistEnv(), {"SM_HOSTS": '["algo-1"]'})
    sm.check_single_process("mnist", "--kvstore dist_sync", "dist_sync", sm.DistEnv(0, 4, 0, 2), {})
    with pytest.raises(ProgramError, match="--kvstore device runs one process over all devices of the host, .*"
                                           "but this job spans 2 hosts"):
        sm.check_single_process("mnist", "--kvstore device", "device", sm.DistEnv(), {"SM_HOSTS": '["a", "b"]'})
    with pytest.raises(ProgramError, match="but 2 ranks were launched"):
        sm.check_single_process("mnist", "--kvstore local", "local", sm.DistEnv(0, 2, 0, 2), {})

"""SDK v3's driver files (sourcecode.json, distributed.json: the SDK's model_dump()) as launcher settings."""

import json
import shlex
from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.compat.sdk_v3 import driver_env, host_env, load_driver_env
from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import parse_training_config

DRIVERS = Path("/opt/ml/input/data/sm_drivers")
DATA = Path("/opt/ml/input/data")
# As SDK v3 3.27 writes them for SourceCode(source_dir=..., entry_script=...) and MPI(...).
SOURCE_CODE = {"source_dir": "/home/me/code", "requirements": None, "entry_script": "train_hvd.py", "command": None,
               "args": None, "ignore_patterns": [".env", ".git", "__pycache__", ".DS_Store", ".cache", ".ipynb_checkpoints"]}
MPI = {"process_count_per_node": 2, "mpi_additional_options": ["-x", "MSG=a b", "--NCCL_DEBUG=INFO"]}


def test_mpi_job_becomes_launcher_settings():
    env = driver_env(SOURCE_CODE, MPI, DRIVERS, DATA)
    config = parse_training_config(Paths(Path("/opt/ml")), {"current_host": "algo-1", "hosts": ["algo-1", "algo-2"]},
                                   {"epochs": "1"}, None, env)
    settings = config.settings
    assert settings.program == "train_hvd.py" and settings.submit_directory == "/opt/ml/input/data/code"
    assert settings.mpi_enabled is True and settings.processes_per_host == 2
    # The toolkit's own option (--NCCL_DEBUG=X) is the launcher's; the rest goes to mpirun as given.
    assert shlex.join(settings.custom_mpi_options.for_mpirun) == shlex.join(
        o for o in MPI["mpi_additional_options"] if not o.startswith("--NCCL_DEBUG"))
    assert settings.custom_mpi_options.nccl_debug == "INFO"
    assert dict(config.program_args) == {"epochs": "1"}
    # What SDK v3's own environment.py gives the program besides the toolkit's variables.
    assert env["SM_SOURCE_DIR"] == "/opt/ml/input/data/code" and env["SM_ENTRY_SCRIPT"] == "train_hvd.py"
    assert json.loads(env["SM_DISTRIBUTED_CONFIG"]) == MPI
    assert env["SM_DISTRIBUTED_DRIVER_DIR"] == "/opt/ml/input/data/sm_drivers/distributed_drivers"


def test_defaults_leave_the_launcher_to_decide():
    env = driver_env(SOURCE_CODE, {"process_count_per_node": None, "mpi_additional_options": None}, DRIVERS, DATA)
    assert "SAGEMAKER_MPI_NUM_OF_PROCESSES_PER_HOST" not in env and "SAGEMAKER_MPI_CUSTOM_MPI_OPTIONS" not in env
    assert env["SAGEMAKER_MPI_ENABLED"] == "true"


def test_source_dir_tarball_is_extracted_from_the_code_channel():
    env = driver_env({**SOURCE_CODE, "source_dir": "s3://bucket/code/sourcedir.tar.gz"}, MPI, DRIVERS, DATA)
    assert env["SAGEMAKER_SUBMIT_DIRECTORY"] == "/opt/ml/input/data/code/sourcedir.tar.gz"


@pytest.mark.parametrize("source_code, distributed, message", [
    ({**SOURCE_CODE, "entry_script": None}, MPI, "SourceCode.entry_script=None"),
    ({**SOURCE_CODE, "source_dir": None}, MPI, "SourceCode.source_dir=None"),
    ({**SOURCE_CODE, "requirements": "reqs/dev.txt"}, MPI, "SourceCode.requirements='reqs/dev.txt'"),
    (SOURCE_CODE, {"mpi_additional_options": "-x A=1"}, "MPI.mpi_additional_options='-x A=1' must be a list"),
    ([], MPI, "must be JSON objects"),
])
def test_bad_driver_files_name_the_field(source_code, distributed, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        driver_env(source_code, distributed, DRIVERS, DATA)


def test_bad_process_count_is_caught_with_the_other_knobs():
    env = driver_env(SOURCE_CODE, {**MPI, "process_count_per_node": 0}, DRIVERS, DATA)
    with pytest.raises(ConfigError, match="sagemaker_mpi_num_of_processes_per_host='0' must be >= 1"):
        parse_training_config(Paths(Path("/opt/ml")), None, {}, None, env)


def test_hyperparameters_still_win_over_the_driver_files():
    env = driver_env(SOURCE_CODE, MPI, DRIVERS, DATA)
    config = parse_training_config(Paths(Path("/opt/ml")), None, {"sagemaker_mpi_num_of_processes_per_host": "1"},
                                   None, env)
    assert config.settings.processes_per_host == 1


def test_host_env_ranks_hosts_in_sorted_order():
    assert host_env(("algo-2", "algo-1", "algo-3"), "algo-2") == {"SM_HOST_COUNT": "3", "SM_CURRENT_HOST_RANK": "1"}


def test_missing_driver_file_is_a_config_error(tmp_path):
    (tmp_path / "sourcecode.json").write_text(json.dumps(SOURCE_CODE))
    with pytest.raises(ConfigError, match="distributed.json is missing"):
        load_driver_env(tmp_path, DATA, {})
    (tmp_path / "distributed.json").write_text(json.dumps(MPI))
    assert load_driver_env(tmp_path, DATA, {"KEEP": "1"})["KEEP"] == "1"

"""training_config: the three files into one TrainingConfig: SM_HPS overrides, which keys reach the program,
the built-in program's launch rules, and a missing or broken file named."""

import json
from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import (
    load_training_config,
    parse_hyperparameters,
    parse_training_config,
)
from unit_helpers import unit_paths

PATHS = Paths(Path("/opt/ml"))

ENTRYPOINTS = str(unit_paths.ENTRYPOINTS)  # the built-in programs and their launch rules


def test_sm_hps_overrides_file():
    hps = parse_hyperparameters({"epochs": "1", "lr": "0.1"}, {"SM_HPS": '{"epochs": 5}'})
    assert hps == {"epochs": 5, "lr": 0.1}
    with pytest.raises(ConfigError, match="SM_HPS is not valid JSON"):
        parse_hyperparameters({}, {"SM_HPS": "{epochs"})


def test_program_args_exclude_launcher_keys():
    config = parse_training_config(
        PATHS, {"current_host": "algo-1", "hosts": ["algo-1"]},
        {"sagemaker_program": '"mnist"', "horovod_timeline": "true", "mpi_peer_timeout_s": "5",
         "batch-size": "64", "use_fpn": "False", "layers": "[1, 2]"},
        {"train": {}}, {}, entrypoints_dir=ENTRYPOINTS)
    assert dict(config.program_args) == {"batch-size": "64", "layers": "[1, 2]", "use_fpn": "False"}
    assert list(config.program_args) == ["batch-size", "layers", "use_fpn"]  # sorted, as the toolkit
    assert [c.name for c in config.channels] == ["train"]


def write_config(root: Path, resource=None, hps=None, inputs=None, raw=None):
    config_dir = root / "input" / "config"
    config_dir.mkdir(parents=True)
    for name, data in (("resourceconfig", resource), ("hyperparameters", hps), ("inputdataconfig", inputs)):
        if data is not None:
            (config_dir / f"{name}.json").write_text(json.dumps(data))
    for name, text in (raw or {}).items():
        (config_dir / f"{name}.json").write_text(text)


def test_load_from_files(tmp_path):
    write_config(tmp_path, {"current_host": "algo-1", "hosts": ["algo-1", "algo-2"]}, {"sagemaker_program": "mnist"},
                 {"train": {"TrainingInputMode": "File"}})
    config = load_training_config({"SAGEMAKER_BASE_DIR": str(tmp_path)}, entrypoints_dir=ENTRYPOINTS)
    assert config.resource.hosts == ("algo-1", "algo-2")
    assert config.settings.program == "mnist"
    assert config.paths.failure_file == tmp_path / "output" / "failure"


def test_the_debugger_and_profiler_configurations_are_kept_as_read(tmp_path):
    write_config(tmp_path, {"current_host": "algo-1", "hosts": ["algo-1"]}, {"sagemaker_program": "mnist"})
    env = {"SAGEMAKER_BASE_DIR": str(tmp_path)}
    hook = {"debughookconfig.json": {"S3OutputPath": "s3://b/job/debug-output"}}
    assert load_training_config(env, entrypoints_dir=ENTRYPOINTS, debugger_configs=hook).debugger_configs == hook
    assert load_training_config(env, entrypoints_dir=ENTRYPOINTS).debugger_configs == {}


def test_bad_json_file_names_the_file(tmp_path):
    write_config(tmp_path, raw={"hyperparameters": "{not json"})
    with pytest.raises(ConfigError, match=r"hyperparameters.json is not valid JSON"):
        load_training_config({"SAGEMAKER_BASE_DIR": str(tmp_path)}, entrypoints_dir=ENTRYPOINTS)


def test_sagemaker_reserved_keys_are_not_the_programs():
    config = parse_training_config(
        PATHS, None, {"_tuning_objective_metric": "acc", "default_user_module_name": "x", "epochs": "2"}, None, {},
            entrypoints_dir=ENTRYPOINTS)
    assert dict(config.program_args) == {"epochs": "2"}


def test_the_builtin_program_is_named_only_without_a_submit_directory():
    assert parse_training_config(PATHS, None, {"sagemaker_program": "mnist"}, None, {},
                                 entrypoints_dir=ENTRYPOINTS).builtin_program == "mnist"
    user = parse_training_config(PATHS, None, {"sagemaker_program": "mnist", "sagemaker_submit_directory": "/x"},
                                 None, {}, entrypoints_dir=ENTRYPOINTS)
    assert user.builtin_program is None
    assert parse_training_config(PATHS, None, {}, None, {}, entrypoints_dir=ENTRYPOINTS).builtin_program is None


def test_a_builtin_programs_launch_rules_are_parsed_with_the_config_and_a_users_script_gets_none():
    rcnn = parse_training_config(PATHS, None, {"sagemaker_program": "mask_rcnn", "horovod": "false"}, None, {},
                                 entrypoints_dir=str(unit_paths.ENTRYPOINTS))
    assert dict(rcnn.launch.single_process_when_false) == {"horovod": "one process over all devices with MXNet's kvstore"}
    assert rcnn.single_process.argument == "horovod"
    user = parse_training_config(PATHS, None, {"sagemaker_program": "mask_rcnn", "sagemaker_submit_directory": "/x",
                                               "horovod": "false"}, None, {}, entrypoints_dir="/nonexistent")
    assert dict(user.launch.single_process_when_false) == {} and user.single_process is None
    assert rcnn.program_argv == ["--horovod", "False"]  # JSON-decoded, then formatted as the toolkit does

"""settings: the launcher's own keys from hyperparameters or the environment (the hyperparameter wins), typed,
with defaults, each declared once and in the README's table; unknown ones warned about, bad ones named; the
toolkit's --NCCL_DEBUG option."""

import json
from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.settings import (
    KNOBS,
    KNOWN_KEYS,
    SAGEMAKER_KEY_NAMES,
    TOOLKIT_OWN_KEYS,
    LauncherSettings,
    parse_launcher_settings,
)
from sagemaker_mxnet_horovod.parse.training_config import (
    parse_hyperparameters,
)
from unit_helpers import unit_paths

PATHS = Paths(Path("/opt/ml"))


def test_launcher_knobs_are_consumed_and_typed():
    hps = parse_hyperparameters({
        "sagemaker_program": '"mnist"',
        "sagemaker_mpi_enabled": "False",
        "sagemaker_mpi_num_of_processes_per_host": "2",
        "sagemaker_mpi_custom_mpi_options": "-x FOO='a b' --mca btl_tcp_if_exclude lo",
        "mpi_peer_timeout_s": "30",
        "horovod_autotune": "true",
        "horovod_fusion_threshold_mb": "64",
        "horovod_cycle_time_ms": "3.5",
        "epochs": "2",
    }, {})
    settings, warnings = parse_launcher_settings(hps, {})
    assert settings.program == "mnist"
    assert settings.mpi_enabled is False  # the toolkit treats "False" as true
    assert settings.processes_per_host == 2
    assert settings.custom_mpi_options.for_mpirun == ("-x", "FOO=a b", "--mca", "btl_tcp_if_exclude", "lo")
    assert settings.peer_timeout_s == 30
    assert settings.horovod_autotune and not settings.horovod_timeline
    assert settings.horovod_fusion_threshold_mb == 64
    assert settings.horovod_cycle_time_ms == 3.5
    assert warnings == []


def test_gradient_compression_is_a_choice_from_the_hyperparameter_or_the_environment():
    assert parse_launcher_settings({}, {})[0].horovod_gradient_compression == "none"
    assert parse_launcher_settings({}, {"HOROVOD_GRADIENT_COMPRESSION": "fp16"})[0].horovod_gradient_compression == "fp16"
    assert parse_launcher_settings({"horovod_gradient_compression": "none"},
                                   {"HOROVOD_GRADIENT_COMPRESSION": "fp16"})[0].horovod_gradient_compression == "none"
    with pytest.raises(ConfigError, match="horovod_gradient_compression='bf16': choose one of none, fp16"):
        parse_launcher_settings({"horovod_gradient_compression": "bf16"}, {})


def test_the_straggler_report_is_on_unless_the_hyperparameter_or_the_environment_turns_it_off():
    assert parse_launcher_settings({}, {})[0].horovod_straggler_report is True
    assert parse_launcher_settings({}, {"HOROVOD_STRAGGLER_REPORT": "false"})[0].horovod_straggler_report is False
    assert parse_launcher_settings({"horovod_straggler_report": "true"},
                                   {"HOROVOD_STRAGGLER_REPORT": "false"})[0].horovod_straggler_report is True
    with pytest.raises(ConfigError, match="horovod_straggler_report"):
        parse_launcher_settings({"horovod_straggler_report": "sometimes"}, {})


def test_the_straggler_reports_spacing_is_seconds_zero_or_more():
    assert parse_launcher_settings({}, {})[0].horovod_straggler_every_s == 10.0
    assert parse_launcher_settings({"horovod_straggler_every_s": "0"}, {})[0].horovod_straggler_every_s == 0.0
    assert parse_launcher_settings({}, {"HOROVOD_STRAGGLER_EVERY_S": "2.5"})[0].horovod_straggler_every_s == 2.5
    for wrong in ("-1", "often"):
        with pytest.raises(ConfigError, match="horovod_straggler_every_s"):
            parse_launcher_settings({"horovod_straggler_every_s": wrong}, {})


def test_unknown_launcher_knob_warns():
    _, warnings = parse_launcher_settings({"horovod_fusion_mb": "3", "mpi_foo": "1", "sagemaker_region": "x"}, {})
    assert len(warnings) == 2
    assert "'horovod_fusion_mb'" in warnings[0] and "'mpi_foo'" in warnings[1]


# Every sagemaker_* hyperparameter an MXNet estimator (or a tuning job around one) sends, retyped from the SDK's
# source: sagemaker 2.257.7 (tests/sdk/requirements-v2.txt), file:line in its package, and SDK v1.
SDK_KEYS = {
    "sagemaker_program": "model.py:141 SCRIPT_PARAM_NAME (Framework._script_mode_hyperparam_update, estimator.py:3724)",
    "sagemaker_submit_directory": "model.py:142 DIR_PARAM_NAME (estimator.py:3723)",
    "sagemaker_container_log_level": "model.py:143 CONTAINER_LOG_LEVEL_PARAM_NAME (estimator.py:3725)",
    "sagemaker_job_name": "model.py:144 JOB_NAME_PARAM_NAME (estimator.py:3726)",
    "sagemaker_region": "model.py:146 SAGEMAKER_REGION_PARAM_NAME (estimator.py:3727)",
    "sagemaker_s3_output": "model.py:147 SAGEMAKER_OUTPUT_LOCATION; the toolkit's params.py S3_OUTPUT_LOCATION_PARAM",
    "sagemaker_parameter_server_enabled": "estimator.py:132 LAUNCH_PS_ENV_NAME (MXNet._configure_distribution, "
                                          "mxnet/estimator.py:200)",
    "sagemaker_mpi_enabled": "estimator.py:133 LAUNCH_MPI_ENV_NAME (mxnet/estimator.py:205)",
    "sagemaker_mpi_num_of_processes_per_host": "estimator.py:137 MPI_NUM_PROCESSES_PER_HOST (mxnet/estimator.py:208)",
    "sagemaker_mpi_custom_mpi_options": "estimator.py:138 MPI_CUSTOM_MPI_OPTIONS (mxnet/estimator.py:212)",
    "sagemaker_distribution_instance_groups": "estimator.py:4111 (Framework._distribution_configuration)",
    "sagemaker_estimator_module": "tuner.py:587 SAGEMAKER_ESTIMATOR_MODULE (a tuning job's static hyperparameters)",
    "sagemaker_estimator_class_name": "tuner.py:588 SAGEMAKER_ESTIMATOR_CLASS_NAME",
    "sagemaker_enable_cloudwatch_metrics": "SDK v1's model.py CLOUDWATCH_METRICS_PARAM_NAME, which its "
                                           "Framework._prepare_for_training set for every job; the toolkit's "
                                           "params.py ENABLE_METRICS_PARAM",
}


@pytest.mark.parametrize("key", sorted(SDK_KEYS))
def test_every_key_the_sdk_sends_is_known_and_never_warned_about(key):
    # A knob of the launcher's, or one of SageMaker's own (parse/settings.SAGEMAKER_KEYS): never the program's.
    assert key in KNOWN_KEYS | SAGEMAKER_KEY_NAMES, f"{key} ({SDK_KEYS[key]}) is in neither list"
    assert parse_launcher_settings({key: ""}, {})[1] == []  # an empty value: no setting, the key still read


def test_the_keys_the_sdk_sets_for_every_job_do_not_warn():
    # What SDK v2 sets for an MXNet estimator (tests/sdk: its hyperparameters, printed), a tuning job's keys, and the
    # toolkit's own keys it does not always set (sagemaker_s3_output, sagemaker_enable_cloudwatch_metrics).
    sdk = {"sagemaker_container_log_level": "20", "sagemaker_job_name": "j", "sagemaker_region": "us-west-2",
           "sagemaker_estimator_class_name": "MXNet", "sagemaker_estimator_module": "sagemaker.mxnet",
           "sagemaker_s3_output": "s3://b", "sagemaker_enable_cloudwatch_metrics": "false"}
    assert parse_launcher_settings(sdk, {})[1] == []


def test_the_toolkits_own_keys_are_not_framework_parameters():
    # The sagemaker-training toolkit's SAGEMAKER_HYPERPARAMETERS (sagemaker_training/params.py), typed from it.
    assert TOOLKIT_OWN_KEYS == {
        "sagemaker_program", "sagemaker_submit_directory", "sagemaker_enable_cloudwatch_metrics", "sagemaker_region",
        "sagemaker_container_log_level", "sagemaker_job_name", "default_user_module_name",
        "_tuning_objective_metric", "sagemaker_s3_output"}


@pytest.mark.parametrize("value", ["true", True, "1"])
def test_parameter_server_enabled(value):
    # SDK v2: distribution={'parameter_server': {'enabled': True}} sets this (JSON-encoded: true).
    settings, warnings = parse_launcher_settings({"sagemaker_parameter_server_enabled": value}, {})
    assert settings.parameter_server_enabled and warnings == []
    assert settings.parameter_server_num_servers is None
    assert settings.parameter_server_port == LauncherSettings().parameter_server_port == 8000


def test_parameter_server_from_the_environment_and_disabled():
    assert parse_launcher_settings({}, {"SAGEMAKER_PARAMETER_SERVER_ENABLED": "true"})[0].parameter_server_enabled
    settings, warnings = parse_launcher_settings({"sagemaker_parameter_server_enabled": False}, {})
    assert not settings.parameter_server_enabled and warnings == []


def test_parameter_server_knobs_and_awss_own_names():
    settings, warnings = parse_launcher_settings({"sagemaker_parameter_server_enabled": True, "_ps_port": "9100",
                                                  "_ps_verbose": "1", "sagemaker_parameter_server_num_servers": "3"},
                                                 {"_PS_PORT": "1"})  # AWS's names are hyperparameters only
    assert settings.parameter_server_port == 9100 and settings.parameter_server_verbose == 1
    assert settings.parameter_server_num_servers == 3 and warnings == []


@pytest.mark.parametrize("mpi", ["true", True, "1"])
def test_parameter_server_and_mpi_both_enabled_is_refused_naming_both(mpi):
    with pytest.raises(ConfigError, match="sagemaker_parameter_server_enabled=true and sagemaker_mpi_enabled=true: "
                                          "choose one distribution"):
        parse_launcher_settings({"sagemaker_parameter_server_enabled": "true", "sagemaker_mpi_enabled": mpi}, {})
    parse_launcher_settings({"sagemaker_parameter_server_enabled": "true", "sagemaker_mpi_enabled": "false"}, {})


@pytest.mark.parametrize("hps,message", [
    ({"sagemaker_parameter_server_enabled": "yes"}, "sagemaker_parameter_server_enabled='yes' is not a boolean"),
    ({"sagemaker_parameter_server_num_servers": "0"}, "sagemaker_parameter_server_num_servers='0' must be >= 1"),
    ({"_ps_port": "80000"}, "_ps_port=80000 is not a TCP port"),
    ({"_ps_verbose": "3"}, "_ps_verbose=3: ps-lite's PS_VERBOSE is 0, 1 or 2"),
])
def test_bad_parameter_server_knobs(hps, message):
    with pytest.raises(ConfigError, match=message):
        parse_launcher_settings({"sagemaker_parameter_server_enabled": "true", **hps}, {})


def test_knobs_from_environment_hyperparameter_wins():
    settings, _ = parse_launcher_settings({}, {"SAGEMAKER_PROGRAM": "mask_rcnn", "MPI_PEER_TIMEOUT_S": "12"})
    assert settings.program == "mask_rcnn" and settings.peer_timeout_s == 12
    settings, _ = parse_launcher_settings({"mpi_peer_timeout_s": "7"}, {"MPI_PEER_TIMEOUT_S": "12"})
    assert settings.peer_timeout_s == 7


@pytest.mark.parametrize("hps,message", [
    ({"sagemaker_mpi_enabled": "yes"}, "sagemaker_mpi_enabled='yes' is not a boolean"),
    ({"sagemaker_mpi_num_of_processes_per_host": "two"}, "sagemaker_mpi_num_of_processes_per_host='two'"),
    ({"sagemaker_mpi_num_of_processes_per_host": "0"}, "must be >= 1"),
    ({"mpi_peer_timeout_s": "soon"}, "mpi_peer_timeout_s='soon' is not a number"),
    ({"horovod_timeline": "maybe"}, "horovod_timeline='maybe'"),
    ({"sagemaker_mpi_custom_mpi_options": "-x 'unterminated"}, "sagemaker_mpi_custom_mpi_options"),
    ({"mpi_handshake_port": "70000"}, "not a TCP port"),
])
def test_bad_knobs(hps, message):
    with pytest.raises(ConfigError, match=message):
        parse_launcher_settings(hps, {})


# Horovod's own variable (a file path; docs/compatibility.md) passes through: it is not the boolean knob.
def test_horovods_own_timeline_variable_in_the_environment_is_not_the_knob():
    settings, _ = parse_launcher_settings({}, {"HOROVOD_TIMELINE": "/opt/ml/output/timeline.json"})
    assert settings.horovod_timeline is False


# The hang timeouts (their environment: test_env_rules_hang_watch.py).
def test_defaults_end_stalls_after_an_hour_and_leave_progress_off():
    settings, warnings = parse_launcher_settings({}, {})
    assert settings.stall_timeout_s == LauncherSettings().stall_timeout_s == 3600
    assert settings.progress_timeout_s == 0
    assert warnings == []


def test_knobs_parse_from_hyperparameters_and_environment():
    settings, warnings = parse_launcher_settings({"horovod_stall_timeout_s": "0", "mpi_progress_timeout_s": "900"}, {})
    assert (settings.stall_timeout_s, settings.progress_timeout_s, warnings) == (0, 900, [])
    settings, _ = parse_launcher_settings({}, {"HOROVOD_STALL_TIMEOUT_S": "120", "MPI_PROGRESS_TIMEOUT_S": "60"})
    assert (settings.stall_timeout_s, settings.progress_timeout_s) == (120, 60)


@pytest.mark.parametrize("hps,message", [
    ({"horovod_stall_timeout_s": "-1"}, "horovod_stall_timeout_s='-1' must be >= 0"),
    ({"horovod_stall_timeout_s": "an hour"}, "horovod_stall_timeout_s='an hour' is not a number"),
    ({"mpi_progress_timeout_s": "inf"}, "mpi_progress_timeout_s='inf' is not a finite number"),
])
def test_bad_values_name_key_and_value(hps, message):
    with pytest.raises(ConfigError, match=message):
        parse_launcher_settings(hps, {})


@pytest.mark.parametrize("options,nccl_debug,for_mpirun", [
    # AWS's Horovod example, verbatim.
    ("-verbose --NCCL_DEBUG=INFO", "INFO", ("-verbose",)),
    ("--NCCL_DEBUG WARN -x A=1", "WARN", ("-x", "A=1")),
    ("--NCCL_DEBUG=INFO -x B=2 --NCCL_DEBUG=TRACE", "TRACE", ("-x", "B=2")),  # the last wins, as with argparse
    ("-x NCCL_DEBUG=INFO", None, ("-x", "NCCL_DEBUG=INFO")),  # mpirun's own -x: left to mpirun
    ("-x 'MSG=a b'", None, ("-x", "MSG=a b")),
    ("", None, ()),
])
def test_custom_mpi_options_nccl_debug_as_the_toolkit(options, nccl_debug, for_mpirun):
    settings, _ = parse_launcher_settings(parse_hyperparameters(
        {"sagemaker_mpi_custom_mpi_options": json.dumps(options)}, {}), {})
    assert settings.custom_mpi_options.nccl_debug == nccl_debug
    assert settings.custom_mpi_options.for_mpirun == for_mpirun


@pytest.mark.parametrize("options", ["--NCCL_DEBUG", "--NCCL_DEBUG -x A=1", "--NCCL_DEBUG="])
def test_nccl_debug_without_value(options):
    with pytest.raises(ConfigError, match="sagemaker_mpi_custom_mpi_options: .*needs a value"):
        parse_launcher_settings({"sagemaker_mpi_custom_mpi_options": options}, {})


def test_console_ranks_all_by_default_or_as_chosen():
    assert parse_launcher_settings({}, {})[0].console_ranks is None
    assert parse_launcher_settings(parse_hyperparameters({"mpi_console_ranks": '"0"'}, {}), {})[0].console_ranks == {0}
    assert parse_launcher_settings({}, {"MPI_CONSOLE_RANKS": "0-1"})[0].console_ranks == {0, 1}
    with pytest.raises(ConfigError, match="mpi_console_ranks='first' is not a list of ranks"):
        parse_launcher_settings({"mpi_console_ranks": "first"}, {})


def test_the_packages_a_requirements_txt_may_replace_none_by_default_or_as_named():
    assert parse_launcher_settings({}, {})[0].requirements_replace == frozenset()
    hps = parse_hyperparameters({"sagemaker_requirements_replace": '"NumPy, opencv_python"'}, {})
    assert parse_launcher_settings(hps, {})[0].requirements_replace == {"numpy", "opencv-python"}
    assert parse_launcher_settings({}, {"SAGEMAKER_REQUIREMENTS_REPLACE": "all"})[0].requirements_replace == {"all"}
    with pytest.raises(ConfigError, match="sagemaker_requirements_replace='numpy>=2' is not a list of package names"):
        parse_launcher_settings({"sagemaker_requirements_replace": "numpy>=2"}, {})


def test_every_setting_is_declared_once_with_its_reason_and_is_in_the_readmes_table():
    readme = (unit_paths.REPO / "README.md").read_text()
    table = readme[readme.index("## Hyperparameters the launcher consumes"):readme.index("## Troubleshooting")]
    keys = [given.key for _, given in KNOBS]
    assert len(keys) == len(set(keys)) == len(KNOBS)
    assert [key for key in keys if f"`{key}`" not in table] == []
    assert [name for name, given in KNOBS if not given.why] == []
    # Every setting is given by its knob (--NCCL_DEBUG is a field of the custom MPI options' value).
    assert {name for name, _ in KNOBS} == set(LauncherSettings.__dataclass_fields__)

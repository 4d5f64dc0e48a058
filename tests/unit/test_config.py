"""Parse: SageMaker's JSON files and SM_* overrides into typed settings; bad input names key and value."""

import json
from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.config import (
    DEFAULT_STALL_TIMEOUT_S,
    ConfigError,
    Paths,
    command_line_arguments,
    decode_hyperparameter,
    format_argument,
    load_training_config,
    parse_bool,
    parse_float,
    parse_hyperparameters,
    parse_input_data_config,
    parse_int,
    parse_launcher_settings,
    parse_resource_config,
    parse_training_config,
)

PATHS = Paths(Path("/opt/ml"))


@pytest.mark.parametrize("text,expected", [
    ("true", True), ("True", True), ("TRUE", True), ("1", True), (" true ", True),
    ("false", False), ("False", False), ("FALSE", False), ("0", False), (True, True), (False, False),
])
def test_bool_parses_strictly(text, expected):
    assert parse_bool("k", text) is expected


@pytest.mark.parametrize("text", ["yes", "no", "", "2", "truee", "none", "on"])
def test_bad_bool_names_key_and_value(text):
    with pytest.raises(ConfigError, match=f"hyperparameter flag={text!r} is not a boolean"):
        parse_bool("flag", text)


def test_ints_and_floats():
    assert parse_int("n", "3") == 3
    assert parse_int("n", " 12 ") == 12
    assert parse_float("x", "0.5") == 0.5
    assert parse_float("x", "1e-3") == 0.001
    with pytest.raises(ConfigError, match="n='3.5' is not an integer"):
        parse_int("n", "3.5")
    with pytest.raises(ConfigError, match="n='two' is not an integer"):
        parse_int("n", "two")
    with pytest.raises(ConfigError, match="is not an integer"):
        parse_int("n", True)
    with pytest.raises(ConfigError, match="n='0' must be >= 1"):
        parse_int("n", "0", minimum=1)
    with pytest.raises(ConfigError, match="x='fast' is not a number"):
        parse_float("x", "fast")
    with pytest.raises(ConfigError, match="not a finite number"):
        parse_float("x", "nan")


@pytest.mark.parametrize("raw,decoded", [
    # As the toolkit: every value JSON-decoded, else kept as it is.
    ('"mnist"', "mnist"),  # SDK v2 JSON-encodes strings
    ("mnist", "mnist"),
    ("3", 3),
    ("0.5", 0.5),
    ("1e-3", 0.001),
    ('"3"', "3"),  # a string that looks like a number stays a string
    ("007", "007"),  # not JSON
    ("true", True),
    ("False", "False"),  # not JSON: the typed parsers read it as false
    ("null", None),
    ('[1, 2]', [1, 2]),
    ('{"a": 1}', {"a": 1}),
    ('"unterminated', '"unterminated'),
    ("", ""),
    (5, 5),  # a hand-written file may hold non-strings
])
def test_decode_hyperparameter(raw, decoded):
    assert decode_hyperparameter(raw) == decoded


def test_resource_config_sorted_and_master():
    rc = parse_resource_config(
        {"current_host": "algo-2", "hosts": ["algo-2", "algo-1"], "network_interface_name": "eth0",
         "current_instance_type": "ml.c5.xlarge"}, {})
    assert rc.hosts == ("algo-1", "algo-2")
    assert rc.master_host == "algo-1"
    assert not rc.is_master
    assert rc.network_interface_name == "eth0"
    assert rc.current_instance_type == "ml.c5.xlarge"


def test_resource_config_keys_on_config_not_hostname():
    # SDK v2 local mode: host names with a random suffix, container hostname is the container id.
    rc = parse_resource_config({"current_host": "algo-1-x7k2q", "hosts": ["algo-2-ab12c", "algo-1-x7k2q"]}, {})
    assert rc.is_master and rc.master_host == "algo-1-x7k2q"


def test_resource_config_env_overrides():
    rc = parse_resource_config(
        {"current_host": "algo-1", "hosts": ["algo-1"]},
        {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2", "SM_NETWORK_INTERFACE_NAME": "eth1"})
    assert rc.hosts == ("algo-1", "algo-2") and rc.current_host == "algo-2"
    assert rc.network_interface_name == "eth1"


def test_no_resource_config_is_one_host():
    rc = parse_resource_config(None, {})
    assert rc.hosts == ("algo-1",) and rc.is_master


@pytest.mark.parametrize("data,message", [
    ({"current_host": "algo-1", "hosts": []}, "'hosts' is empty"),
    ({"current_host": "algo-3", "hosts": ["algo-1", "algo-2"]}, "current_host 'algo-3' is not in hosts"),
    ({"current_host": "algo-1", "hosts": "algo-1"}, "'hosts' must be a list"),
    ({"current_host": "algo-1", "hosts": ["algo-1", "algo-1"]}, "duplicates"),
    ({"hosts": ["algo-1"]}, "'current_host' must be a non-empty string"),
    ({"current_host": 3, "hosts": ["algo-1"]}, "'current_host' must be a non-empty string"),
    ([], "must be a JSON object"),
])
def test_bad_resource_config(data, message):
    with pytest.raises(ConfigError, match=message):
        parse_resource_config(data, {})


def test_bad_sm_hosts_override():
    with pytest.raises(ConfigError, match="SM_HOSTS="):
        parse_resource_config({"current_host": "algo-1", "hosts": ["algo-1"]}, {"SM_HOSTS": "algo-1,algo-2"})


def test_input_data_config():
    channels = parse_input_data_config({
        "train": {"TrainingInputMode": "Pipe", "ContentType": "application/x-recordio"},
        "test": {"S3DistributionType": "FullyReplicated"},
    })
    assert [(c.name, c.input_mode) for c in channels] == [("test", "File"), ("train", "Pipe")]
    with pytest.raises(ConfigError, match="channel 'train' has TrainingInputMode 'Stream'"):
        parse_input_data_config({"train": {"TrainingInputMode": "Stream"}})
    with pytest.raises(ConfigError, match="channel 'train' must be an object"):
        parse_input_data_config({"train": "s3://x"})


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
    assert settings.custom_mpi_options == ("-x", "FOO=a b", "--mca", "btl_tcp_if_exclude", "lo")
    assert settings.peer_timeout_s == 30
    assert settings.horovod_autotune and not settings.horovod_timeline
    assert settings.horovod_fusion_threshold_mb == 64
    assert settings.horovod_cycle_time_ms == 3.5
    assert warnings == []


def test_unknown_launcher_knob_warns():
    _, warnings = parse_launcher_settings({"horovod_fusion_mb": "3", "mpi_foo": "1", "sagemaker_region": "x"}, {})
    assert len(warnings) == 2
    assert "'horovod_fusion_mb'" in warnings[0] and "'mpi_foo'" in warnings[1]


@pytest.mark.parametrize("value", ["true", True, "1"])
def test_parameter_server_is_refused_with_what_to_use_instead(value):
    # SDK v2: distribution={'parameter_server': {'enabled': True}} sets this (JSON-encoded: true).
    with pytest.raises(ConfigError, match=r"sagemaker_parameter_server_enabled=true: this image trains with "
                                          r"Horovod over MPI.*distribution=\{'mpi': \{'enabled': True\}\}"):
        parse_launcher_settings({"sagemaker_parameter_server_enabled": value}, {})


def test_parameter_server_disabled_is_fine():
    _, warnings = parse_launcher_settings({"sagemaker_parameter_server_enabled": False}, {})
    assert warnings == []


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
    assert settings.stall_timeout_s == DEFAULT_STALL_TIMEOUT_S == 3600
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
        {"train": {}}, {})
    assert dict(config.program_args) == {"batch-size": "64", "layers": "[1, 2]", "use_fpn": "False"}
    assert list(config.program_args) == ["batch-size", "layers", "use_fpn"]  # sorted, as the toolkit    assert [c.name for c in config.channels] == ["train"]


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
    config = load_training_config({"SAGEMAKER_BASE_DIR": str(tmp_path)})
    assert config.resource.hosts == ("algo-1", "algo-2")
    assert config.settings.program == "mnist"
    assert config.paths.failure_file == tmp_path / "output" / "failure"


def test_bad_json_file_names_the_file(tmp_path):
    write_config(tmp_path, raw={"hyperparameters": "{not json"})
    with pytest.raises(ConfigError, match=r"hyperparameters.json is not valid JSON"):
        load_training_config({"SAGEMAKER_BASE_DIR": str(tmp_path)})


# ---------------------------------------------------------------------------------------------------------
# Heterogeneous clusters: instance groups and the distribution instance groups.

def hetero_resource(current, groups=(("train", ("algo-1", "algo-2")), ("data", ("algo-3",))), **extra):
    hosts = sorted(h for _, group_hosts in groups for h in group_hosts)
    return {"current_host": current, "hosts": hosts, "current_group_name": next(
        name for name, group_hosts in groups if current in group_hosts),
        "instance_groups": [{"instance_group_name": name, "instance_type": "ml.c5.xlarge", "hosts": list(group_hosts)}
                            for name, group_hosts in groups], **extra}


def hetero_config(current, distribution='["train"]', groups=None, env=None):
    resource = hetero_resource(current, **({"groups": groups} if groups else {}))
    hps = {"sagemaker_program": '"mnist"'}
    if distribution is not None:
        hps["sagemaker_distribution_instance_groups"] = distribution
    return parse_training_config(PATHS, resource, hps, {}, env or {})


def test_instance_groups_parsed_in_order():
    rc = parse_resource_config(hetero_resource("algo-3"), {})
    assert [(g.name, g.hosts) for g in rc.instance_groups] == [("train", ("algo-1", "algo-2")), ("data", ("algo-3",))]
    assert rc.group_of("algo-3") == "data" and rc.group_of("algo-1") == "train"
    # Without the hyperparameter: the current host's own group (each group its own job, as the toolkit with MPI).
    assert rc.distribution_hosts == ("algo-3",)


@pytest.mark.parametrize("current", ["algo-1", "algo-2", "algo-3"])
def test_distribution_hosts_are_the_named_groups_on_every_host(current):
    config = hetero_config(current)
    assert config.settings.distribution_instance_groups == ("train",)
    assert config.resource.distribution_hosts == ("algo-1", "algo-2")
    assert config.resource.master_host == "algo-1"
    assert config.resource.is_master == (current == "algo-1")
    assert config.resource.hosts == ("algo-1", "algo-2", "algo-3")  # SM_HOSTS: still every host
    assert not config.warnings  # a known launcher key now, no "unknown ... ignored"


def test_master_is_the_first_host_of_the_distribution_group_not_hosts0():
    groups = (("data", ["algo-1"]), ("train", ["algo-2", "algo-3"]))
    config = hetero_config("algo-1", groups=groups)
    assert config.resource.distribution_hosts == ("algo-2", "algo-3")
    assert config.resource.master_host == "algo-2" and not config.resource.is_master
    assert hetero_config("algo-2", groups=groups).resource.is_master


def test_distribution_hosts_keep_the_toolkits_order():
    # The toolkit takes the groups in resourceconfig.json's order and each group's hosts as listed.
    groups = (("b", ["algo-4", "algo-3"]), ("a", ["algo-1"]), ("c", ["algo-2"]))
    config = hetero_config("algo-1", distribution='["a", "b"]', groups=groups)
    assert config.resource.distribution_hosts == ("algo-4", "algo-3", "algo-1")
    assert config.resource.master_host == "algo-4"


def test_distribution_groups_from_the_environment():
    config = hetero_config("algo-2", distribution=None, env={"SAGEMAKER_DISTRIBUTION_INSTANCE_GROUPS": '["data"]'})
    assert config.resource.distribution_hosts == ("algo-3",)


def test_homogeneous_and_local_mode_jobs_span_every_host():
    # SageMaker writes one group for a homogeneous job; SDK local mode writes no groups at all.
    one_group = hetero_config("algo-2", distribution='["homogeneousCluster"]',
                              groups=(("homogeneousCluster", ["algo-1", "algo-2"]),))
    assert one_group.resource.distribution_hosts == ("algo-1", "algo-2")
    no_groups = parse_training_config(PATHS, {"current_host": "algo-2", "hosts": ["algo-2", "algo-1"]},
                                      {"sagemaker_distribution_instance_groups": '["homogeneousCluster"]'}, {}, {})
    assert no_groups.resource.distribution_hosts == ("algo-1", "algo-2") and no_groups.resource.master_host == "algo-1"
    unset = parse_training_config(PATHS, {"current_host": "algo-2", "hosts": ["algo-2", "algo-1"]}, {}, {}, {})
    assert unset.resource.distribution_hosts == ("algo-1", "algo-2")


def test_unknown_distribution_group_names_key_and_value():
    with pytest.raises(ConfigError) as error:
        hetero_config("algo-1", distribution='["train", "gpu"]')
    assert str(error.value) == (
        "hyperparameter sagemaker_distribution_instance_groups=['train', 'gpu'] names instance group 'gpu', which "
        "resourceconfig.json does not have (instance_groups: train, data)")
    with pytest.raises(ConfigError, match=r"=\['train'\] names instance group 'train', which resourceconfig.json "
                                          r"does not have \(no instance_groups: the job is the one group "
                                          r"homogeneousCluster\)"):
        parse_training_config(PATHS, {"current_host": "algo-1", "hosts": ["algo-1"]},
                              {"sagemaker_distribution_instance_groups": '["train"]'}, {}, {})


@pytest.mark.parametrize("value", ['"train"', "train", "[]", "[1]", '["train", "train"]', '{"train": 1}', '[""]'])
def test_bad_distribution_groups_value(value):
    with pytest.raises(ConfigError, match="hyperparameter sagemaker_distribution_instance_groups=.* (must be a "
                                          "non-empty JSON list of instance group names|names an instance group twice)"):
        hetero_config("algo-1", distribution=value)


def test_current_host_in_no_group_is_a_config_error():
    resource = hetero_resource("algo-1")
    resource["hosts"].append("algo-4")
    resource["current_host"] = "algo-4"
    del resource["current_group_name"]
    with pytest.raises(ConfigError) as error:
        parse_resource_config(resource, {})
    assert str(error.value) == ("resourceconfig.json: current_host 'algo-4' is in none of instance_groups "
                                "(train: algo-1, algo-2; data: algo-3)")


@pytest.mark.parametrize("change,message", [
    (lambda r: r.update(current_group_name="data"),
     "current_group_name 'data' does not hold current_host 'algo-1'"),
    (lambda r: r["instance_groups"][1]["hosts"].append("algo-9"),
     "instance group 'data' has host 'algo-9', which is not in hosts"),
    (lambda r: r["instance_groups"][1]["hosts"].append("algo-2"),
     "host 'algo-2' is in instance groups 'train' and 'data'"),
    (lambda r: r["instance_groups"][1].update(hosts=[]), "instance group 'data': 'hosts' must be a non-empty list"),
    (lambda r: r["instance_groups"][1].update(instance_group_name="train"), "instance group 'train' is listed twice"),
    (lambda r: r["instance_groups"][1].pop("instance_group_name"), "'instance_group_name' must be a non-empty string"),
    (lambda r: r.update(instance_groups={"train": ["algo-1"]}), "'instance_groups' must be a list"),
])
def test_bad_instance_groups(change, message):
    resource = hetero_resource("algo-1")
    change(resource)
    with pytest.raises(ConfigError, match=message):
        parse_resource_config(resource, {})
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
    assert settings.nccl_debug == nccl_debug
    assert settings.custom_mpi_options == for_mpirun


@pytest.mark.parametrize("options", ["--NCCL_DEBUG", "--NCCL_DEBUG -x A=1", "--NCCL_DEBUG="])
def test_nccl_debug_without_value(options):
    with pytest.raises(ConfigError, match="sagemaker_mpi_custom_mpi_options: .*needs a value"):
        parse_launcher_settings({"sagemaker_mpi_custom_mpi_options": options}, {})


@pytest.mark.parametrize("value,argument", [
    (3, "3"), (0.1, "0.1"), (True, "True"), (False, "False"), ("a b", "a b"), ("3", "3"),
    ([1, "a"], "[1, 'a']"), ({"b": 2, "a": True}, "a=True,b=2"), (None, ""),
])
def test_arguments_formatted_as_the_toolkit(value, argument):
    assert format_argument(value) == argument


def test_arguments_sorted_single_letter_keys_one_dash():
    assert command_line_arguments({"lr": "0.1", "b": "2", "epochs": "3"}) == [
        "-b", "2", "--epochs", "3", "--lr", "0.1"]


def test_sagemaker_reserved_keys_are_not_the_programs():
    config = parse_training_config(
        PATHS, None, {"_tuning_objective_metric": "acc", "default_user_module_name": "x", "epochs": "2"}, None, {})
    assert dict(config.program_args) == {"epochs": "2"}

"""resource_config: resourceconfig.json with SM_* overrides, the hosts sorted and the master chosen from the
config (never the hostname); instance groups and the hosts MPI spans, as the toolkit decides them."""

from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.resource_config import parse_resource_config
from sagemaker_mxnet_horovod.parse.training_config import (
    parse_training_config,
)
from unit_helpers import unit_paths

PATHS = Paths(Path("/opt/ml"))

ENTRYPOINTS = str(unit_paths.ENTRYPOINTS)  # the built-in programs and their launch rules


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
    return parse_training_config(PATHS, resource, hps, {}, env or {}, entrypoints_dir=ENTRYPOINTS)


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
                                      {"sagemaker_distribution_instance_groups": '["homogeneousCluster"]'}, {}, {},
                                          entrypoints_dir=ENTRYPOINTS)
    assert no_groups.resource.distribution_hosts == ("algo-1", "algo-2") and no_groups.resource.master_host == "algo-1"
    unset = parse_training_config(PATHS, {"current_host": "algo-2", "hosts": ["algo-2", "algo-1"]}, {}, {}, {},
                                  entrypoints_dir=ENTRYPOINTS)
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
                              {"sagemaker_distribution_instance_groups": '["train"]'}, {}, {},
                                  entrypoints_dir=ENTRYPOINTS)


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

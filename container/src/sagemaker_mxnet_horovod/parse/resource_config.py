"""resourceconfig.json: the job's hosts, this host, the interface and instance groups, and the hosts MPI spans
(the distribution instance groups'), as the sagemaker-training toolkit reads them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.values import decode_hyperparameter, require_str

# SageMaker's (and the toolkit's) name for the one instance group of a homogeneous job.
HOMOGENEOUS_GROUP = "homogeneousCluster"


@dataclass(frozen=True)
class InstanceGroup:
    name: str
    instance_type: str
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class ResourceConfig:
    current_host: str
    hosts: tuple[str, ...]  # SageMaker sorts them; hosts[0] is the master
    network_interface_name: str | None = None
    current_instance_type: str | None = None
    current_group_name: str | None = None
    instance_groups: tuple[InstanceGroup, ...] = ()
    # The hosts MPI spans, in the toolkit's order (the distribution instance groups' hosts, group by group).
    # Left empty, the current host's instance group (every host without instance_groups); parse_training_config
    # sets it from hyperparameter sagemaker_distribution_instance_groups (resolve_distribution_hosts).
    distribution_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.distribution_hosts:
            own_group = next((g.hosts for g in self.instance_groups if self.current_host in g.hosts), self.hosts)
            object.__setattr__(self, "distribution_hosts", tuple(own_group))

    @property
    def master_host(self) -> str:
        """As the toolkit's master_hostname: the first distribution host."""
        return self.distribution_hosts[0]

    def group_of(self, host: str) -> str | None:
        return next((g.name for g in self.instance_groups if host in g.hosts), None)

    @property
    def is_master(self) -> bool:
        return self.current_host == self.master_host


def parse_resource_config(data: Any, env: Mapping[str, str], source: str = "resourceconfig.json") -> ResourceConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a JSON object")
    data = dict(data)
    # SM_* only as overrides of what the file says.
    if "SM_CURRENT_HOST" in env:
        data["current_host"] = env["SM_CURRENT_HOST"]
    if "SM_HOSTS" in env:
        try:
            data["hosts"] = json.loads(env["SM_HOSTS"])
        except ValueError:
            raise ConfigError(f"SM_HOSTS={env['SM_HOSTS']!r} is not a JSON list") from None
    if "SM_NETWORK_INTERFACE_NAME" in env:
        data["network_interface_name"] = env["SM_NETWORK_INTERFACE_NAME"]
    if "SM_CURRENT_INSTANCE_TYPE" in env:
        data["current_instance_type"] = env["SM_CURRENT_INSTANCE_TYPE"]

    if "hosts" not in data and "current_host" not in data:
        # No resource config at all (plain `docker run IMAGE train`): a one-host job.
        data["current_host"] = "algo-1"
        data["hosts"] = ["algo-1"]
    current_host = require_str(source, data, "current_host")
    hosts = data.get("hosts")
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
        raise ConfigError(f"{source}: 'hosts' must be a list of host names, got {hosts!r}")
    if not hosts:
        raise ConfigError(f"{source}: 'hosts' is empty")
    if len(set(hosts)) != len(hosts):
        raise ConfigError(f"{source}: 'hosts' has duplicates: {hosts}")
    if current_host not in hosts:
        raise ConfigError(f"{source}: current_host {current_host!r} is not in hosts {hosts}")

    interface = data.get("network_interface_name")
    if interface is not None and not isinstance(interface, str):
        raise ConfigError(f"{source}: 'network_interface_name' must be a string, got {interface!r}")

    groups = parse_instance_groups(source, data.get("instance_groups"), hosts, current_host,
                                   data.get("current_group_name"))
    return ResourceConfig(
        current_host=current_host,
        hosts=tuple(sorted(hosts)),
        network_interface_name=interface or None,
        current_instance_type=data.get("current_instance_type") or None,
        current_group_name=data.get("current_group_name") or None,
        instance_groups=tuple(groups),
    )


def parse_instance_groups(source: str, raw_groups: Any, hosts: list, current_host: str,
                          current_group_name: Any) -> tuple[InstanceGroup, ...]:
    """resourceconfig.json's instance_groups: each host of the job in at most one group, the current host in
    one (the group current_group_name names, when given). None or empty: no groups (local mode)."""
    if not raw_groups:
        return ()
    if not isinstance(raw_groups, list):
        raise ConfigError(f"{source}: 'instance_groups' must be a list, got {raw_groups!r}")
    groups: list[InstanceGroup] = []
    group_by_host: dict[str, str] = {}
    for raw in raw_groups:
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: each of 'instance_groups' must be an object, got {raw!r}")
        name = require_str(source, raw, "instance_group_name")
        group_hosts = raw.get("hosts")
        if not isinstance(group_hosts, list) or not group_hosts or not all(isinstance(h, str) for h in group_hosts):
            raise ConfigError(f"{source}: instance group {name!r}: 'hosts' must be a non-empty list of host names, "
                              f"got {group_hosts!r}")
        if any(g.name == name for g in groups):
            raise ConfigError(f"{source}: instance group {name!r} is listed twice in 'instance_groups'")
        for host in group_hosts:
            if host not in hosts:
                raise ConfigError(f"{source}: instance group {name!r} has host {host!r}, which is not in hosts {hosts}")
            if host in group_by_host:
                raise ConfigError(f"{source}: host {host!r} is in instance groups {group_by_host[host]!r} and {name!r}")
            group_by_host[host] = name
        groups.append(InstanceGroup(name=name, instance_type=str(raw.get("instance_type", "")),
                                    hosts=tuple(group_hosts)))
    listed = "; ".join(f"{g.name}: {', '.join(g.hosts)}" for g in groups)
    if current_host not in group_by_host:
        raise ConfigError(f"{source}: current_host {current_host!r} is in none of instance_groups ({listed})")
    if current_group_name and current_group_name != group_by_host[current_host]:
        raise ConfigError(f"{source}: current_group_name {current_group_name!r} does not hold current_host "
                          f"{current_host!r} ({listed})")
    return tuple(groups)


def parse_instance_group_names(key: str, value: Any) -> tuple[str, ...]:
    """sagemaker_distribution_instance_groups: a JSON list of group names (the SDK's distribution
    `instance_groups`), e.g. '["train"]'."""
    names = decode_hyperparameter(value)
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"hyperparameter {key}={value!r} must be a non-empty JSON list of instance group names, "
                          'e.g. ["train"]')
    if len(set(names)) != len(names):
        raise ConfigError(f"hyperparameter {key}={value!r} names an instance group twice")
    return tuple(names)


def resolve_distribution_hosts(resource: ResourceConfig, group_names: tuple[str, ...] | None) -> tuple[str, ...]:
    """The hosts of the named distribution instance groups, group by group in resourceconfig.json's order, as
    the toolkit's distribution_hosts. None (not set): the resource config's default, the current host's group.
    Without instance_groups the job is the one group homogeneousCluster."""
    if group_names is None:
        return resource.distribution_hosts
    groups = resource.instance_groups or (InstanceGroup(HOMOGENEOUS_GROUP, "", resource.hosts),)
    known = [g.name for g in groups]
    listed = (f"instance_groups: {', '.join(known)}" if resource.instance_groups
              else f"no instance_groups: the job is the one group {HOMOGENEOUS_GROUP}")
    for name in group_names:
        if name not in known:
            raise ConfigError(f"hyperparameter sagemaker_distribution_instance_groups={list(group_names)} names "
                              f"instance group {name!r}, which resourceconfig.json does not have ({listed})")
    return tuple(host for group in groups if group.name in group_names for host in group.hosts)

"""Parse: SageMaker's config files (and SM_* overrides) into typed, validated dataclasses.

Everything here is pure: functions take file contents and an environment mapping and return values or
raise ConfigError with a message that names the file, key and value at fault.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

BUILTIN_PROGRAMS = ("mnist", "faster_rcnn", "mask_rcnn")

# Hyperparameter prefixes the launcher consumes; keys with them never reach the training program.
LAUNCHER_PREFIXES = ("sagemaker_", "horovod_", "mpi_")
# Keys SageMaker itself sets that the toolkit never passes to the program either (hyperparameter tuning jobs
# add _tuning_objective_metric).
TOOLKIT_RESERVED_KEYS = ("_tuning_objective_metric", "default_user_module_name")

DEFAULT_PEER_TIMEOUT_S = 300.0
DEFAULT_HANDSHAKE_PORT = 7420
# SageMaker's (and the toolkit's) name for the one instance group of a homogeneous job.
HOMOGENEOUS_GROUP = "homogeneousCluster"
# A Horovod collective some ranks wait on while others never submit it ends the job after this long. An hour
# of every other rank idle is far beyond a healthy job's one-rank work (validation or a checkpoint on rank 0,
# a slow first step) and far below SageMaker's default MaxRuntimeInSeconds (a day). See docs/hangs.md.
DEFAULT_STALL_TIMEOUT_S = 3600.0


class ConfigError(ValueError):
    """The job's configuration is invalid; the message says where and why."""


@dataclass(frozen=True)
class Paths:
    base: Path  # /opt/ml unless SAGEMAKER_BASE_DIR says otherwise (tests)

    @property
    def config_dir(self) -> Path:
        return self.base / "input" / "config"

    @property
    def input_dir(self) -> Path:
        return self.base / "input"

    @property
    def data_dir(self) -> Path:
        return self.base / "input" / "data"

    @property
    def model_dir(self) -> Path:
        return self.base / "model"

    @property
    def output_dir(self) -> Path:
        return self.base / "output"

    @property
    def output_data_dir(self) -> Path:
        return self.base / "output" / "data"

    @property
    def output_intermediate_dir(self) -> Path:
        return self.base / "output" / "intermediate"

    @property
    def failure_file(self) -> Path:
        return self.base / "output" / "failure"

    @property
    def code_dir(self) -> Path:
        return self.base / "code"

    @property
    def checkpoint_dir(self) -> Path:
        return self.base / "checkpoints"


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


@dataclass(frozen=True)
class Channel:
    name: str
    input_mode: str = "File"  # File | Pipe | FastFile
    content_type: str | None = None
    s3_distribution_type: str | None = None


@dataclass(frozen=True)
class LauncherSettings:
    """Knobs the launcher consumes (hyperparameters with a launcher prefix, or the environment)."""

    program: str | None = None
    submit_directory: str | None = None
    mpi_enabled: bool | None = None  # None: decided by the process count
    processes_per_host: int | None = None
    custom_mpi_options: tuple[str, ...] = ()  # for mpirun, without the toolkit's own --NCCL_DEBUG
    nccl_debug: str | None = None  # --NCCL_DEBUG in custom_mpi_options (the toolkit's option)
    peer_timeout_s: float = DEFAULT_PEER_TIMEOUT_S
    handshake_port: int = DEFAULT_HANDSHAKE_PORT
    horovod_autotune: bool = False
    horovod_timeline: bool = False
    horovod_fusion_threshold_mb: float | None = None
    horovod_cycle_time_ms: float | None = None
    distribution_instance_groups: tuple[str, ...] | None = None  # None: not set (the current host's group)
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S  # 0: Horovod only warns about stalls
    progress_timeout_s: float = 0.0  # 0: off; a rank idle this long (progress.py) ends the job


@dataclass(frozen=True)
class TrainingConfig:
    paths: Paths
    resource: ResourceConfig
    hyperparameters: Mapping[str, Any]  # every key, decoded (what SM_HPS shows)
    program_args: Mapping[str, str]  # the keys the program receives as --key value
    settings: LauncherSettings
    channels: tuple[Channel, ...]
    warnings: tuple[str, ...] = field(default=())
    # As read (after overrides), for the SM_RESOURCE_CONFIG / SM_INPUT_DATA_CONFIG the program sees.
    raw_resource_config: Mapping[str, Any] = field(default_factory=dict)
    raw_input_data_config: Mapping[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------------
# Scalar parsing: hyperparameters arrive as strings.

_TRUE = {"true", "1"}
_FALSE = {"false", "0"}


def parse_bool(key: str, value: Any) -> bool:
    """Strict: true/false in any case, 1/0. 'False' is false (the toolkit treats it as a truthy string)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"hyperparameter {key}={value!r} is not a boolean (use true/false or 1/0)")


def parse_int(key: str, value: Any, minimum: int | None = None) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"hyperparameter {key}={value!r} is not an integer")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"hyperparameter {key}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ConfigError(f"hyperparameter {key}={value!r} must be >= {minimum}")
    return number


def parse_float(key: str, value: Any, minimum: float | None = None) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"hyperparameter {key}={value!r} is not a number")
    try:
        number = float(str(value).strip())
    except ValueError:
        raise ConfigError(f"hyperparameter {key}={value!r} is not a number") from None
    if not math.isfinite(number):
        raise ConfigError(f"hyperparameter {key}={value!r} is not a finite number")
    if minimum is not None and number < minimum:
        raise ConfigError(f"hyperparameter {key}={value!r} must be >= {minimum:g}")
    return number


def decode_hyperparameter(value: Any) -> Any:
    """As the sagemaker-training toolkit reads hyperparameters.json: each value JSON-decoded, else kept as is.

    SageMaker writes every value as a string; SDK v2 JSON-encodes them ('"mnist"', '3', '[1, 2]', 'true'), so
    '3' is the number 3 and 'true' the boolean, while 'False' or 'resnet50_v1b' (not JSON) stay strings. The
    launcher's typed parsers accept both forms, per key.
    """
    try:
        return json.loads(value)
    except (ValueError, TypeError):
        return value


def format_argument(value: Any) -> str:
    """A decoded hyperparameter as the toolkit passes it to the program (mapping.to_cmd_args): Python's str()
    (True, 0.1, [1, 2]), None as '', a dict as k=v,k=v (sorted)."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    return str(value)


def command_line_arguments(program_args: Mapping[str, str]) -> list[str]:
    """The program's arguments as the toolkit builds them: keys sorted, --key value (-k value for one letter)."""
    argv = []
    for key in sorted(program_args):
        argv += [f"--{key}" if len(key) > 1 else f"-{key}", program_args[key]]
    return argv


# ---------------------------------------------------------------------------------------------------------
# Files.


def load_json(path: Path, required: bool = True) -> Any:
    try:
        text = path.read_text()
    except FileNotFoundError:
        if required:
            raise ConfigError(f"{path} is missing") from None
        return None
    except OSError as error:
        raise ConfigError(f"{path} cannot be read: {error.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as error:
        raise ConfigError(f"{path} is not valid JSON: {error}") from None


def _require_str(source: str, data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{source}: '{key}' must be a non-empty string, got {value!r}")
    return value


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
    current_host = _require_str(source, data, "current_host")
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
        name = _require_str(source, raw, "instance_group_name")
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


def parse_input_data_config(data: Any, source: str = "inputdataconfig.json") -> tuple[Channel, ...]:
    if data is None:
        return ()
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a JSON object of channels")
    channels = []
    for name in sorted(data):
        spec = data[name]
        if not isinstance(spec, dict):
            raise ConfigError(f"{source}: channel {name!r} must be an object, got {spec!r}")
        mode = spec.get("TrainingInputMode", "File")
        if mode not in ("File", "Pipe", "FastFile"):
            raise ConfigError(f"{source}: channel {name!r} has TrainingInputMode {mode!r} (File, Pipe or FastFile)")
        channels.append(
            Channel(
                name=name,
                input_mode=mode,
                content_type=spec.get("ContentType"),
                s3_distribution_type=spec.get("S3DistributionType"),
            )
        )
    return tuple(channels)


# ---------------------------------------------------------------------------------------------------------
# Launcher knobs: hyperparameter first, then the environment (upper-cased key), then the default.

_KNOWN_KNOBS = {
    "sagemaker_program",
    "sagemaker_submit_directory",
    "sagemaker_mpi_enabled",
    "sagemaker_mpi_num_of_processes_per_host",
    "sagemaker_mpi_custom_mpi_options",
    "sagemaker_parameter_server_enabled",
    "mpi_peer_timeout_s",
    "mpi_handshake_port",
    "horovod_autotune",
    "horovod_timeline",
    "horovod_fusion_threshold_mb",
    "horovod_cycle_time_ms",
    "sagemaker_distribution_instance_groups",
    "horovod_stall_timeout_s",
    "mpi_progress_timeout_s",
}
# Set by the SDK for every job; meaningless to this launcher, so not worth a warning.
_IGNORED_KNOBS = {
    "sagemaker_container_log_level",
    "sagemaker_job_name",
    "sagemaker_region",
    "sagemaker_estimator_class_name",
    "sagemaker_estimator_module",
}

_KNOB_ENV_ALIASES = {
    "sagemaker_program": ("SAGEMAKER_PROGRAM", "SM_USER_ENTRY_POINT"),
    # HOROVOD_TIMELINE in the environment is Horovod's own variable (a file path, e.g. AWS's blog posts'
    # /opt/ml/output/timeline.json), passed to the ranks as it is; the knob is a hyperparameter only.
    "horovod_timeline": (),
}


def _knob(hps: Mapping[str, Any], env: Mapping[str, str], key: str) -> Any:
    if key in hps:
        return hps[key]
    for name in _KNOB_ENV_ALIASES.get(key, (key.upper(),)):
        if name in env:
            return env[name]
    return None


def split_nccl_debug(options: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """The toolkit's own option in sagemaker_mpi_custom_mpi_options: `--NCCL_DEBUG=X` or `--NCCL_DEBUG X` sets
    NCCL_DEBUG on every rank (AWS's Horovod examples pass '-verbose --NCCL_DEBUG=INFO'); mpirun would reject it.
    The last one wins, as with the toolkit's argparse. Returns (its value or None, the options for mpirun)."""
    value, rest, i = None, [], 0
    while i < len(options):
        token = options[i]
        if token == "--NCCL_DEBUG":
            if i + 1 >= len(options) or options[i + 1].startswith("-"):
                raise ConfigError("hyperparameter sagemaker_mpi_custom_mpi_options: --NCCL_DEBUG needs a value "
                                  "(--NCCL_DEBUG=INFO)")
            value = options[i + 1]
            i += 2
            continue
        if token.startswith("--NCCL_DEBUG="):
            value = token.partition("=")[2]
            if not value:
                raise ConfigError(f"hyperparameter sagemaker_mpi_custom_mpi_options: {token!r} needs a value "
                                  "(--NCCL_DEBUG=INFO)")
        else:
            rest.append(token)
        i += 1
    return value, tuple(rest)


def parse_launcher_settings(hps: Mapping[str, Any], env: Mapping[str, str]) -> tuple[LauncherSettings, list[str]]:
    warnings = [
        f"unknown launcher hyperparameter {key!r} ignored (known: {', '.join(sorted(_KNOWN_KNOBS))})"
        for key in sorted(hps)
        if key.startswith(LAUNCHER_PREFIXES) and key not in _KNOWN_KNOBS and key not in _IGNORED_KNOBS
    ]

    def optional(key, parse):
        value = _knob(hps, env, key)
        return None if value is None or value == "" else parse(key, value)

    if optional("sagemaker_parameter_server_enabled", parse_bool):
        # SDK v2's distribution={'parameter_server': {'enabled': True}} (MXNet's kvstore 'dist_sync').
        raise ConfigError(
            "hyperparameter sagemaker_parameter_server_enabled=true: this image trains with Horovod over MPI, "
            "not with MXNet parameter servers; use distribution={'mpi': {'enabled': True}} (SDK v2) or "
            "distributed=MPI() (SDK v3) with a Horovod script (hvd.init(), hvd.DistributedTrainer)"
        )
    custom = _knob(hps, env, "sagemaker_mpi_custom_mpi_options")
    try:
        custom_options = tuple(shlex.split(str(custom))) if custom else ()
    except ValueError as error:
        raise ConfigError(f"hyperparameter sagemaker_mpi_custom_mpi_options={custom!r}: {error}") from None
    nccl_debug, custom_options = split_nccl_debug(custom_options)

    program = _knob(hps, env, "sagemaker_program")
    submit_directory = _knob(hps, env, "sagemaker_submit_directory")
    settings = LauncherSettings(
        program=str(program) if program else None,
        submit_directory=str(submit_directory) if submit_directory else None,
        mpi_enabled=optional("sagemaker_mpi_enabled", parse_bool),
        processes_per_host=optional(
            "sagemaker_mpi_num_of_processes_per_host", lambda k, v: parse_int(k, v, minimum=1)
        ),
        custom_mpi_options=custom_options,
        nccl_debug=nccl_debug,
        peer_timeout_s=optional("mpi_peer_timeout_s", lambda k, v: parse_float(k, v, minimum=1))
        or DEFAULT_PEER_TIMEOUT_S,
        handshake_port=optional("mpi_handshake_port", lambda k, v: parse_int(k, v, minimum=1))
        or DEFAULT_HANDSHAKE_PORT,
        horovod_autotune=bool(optional("horovod_autotune", parse_bool)),
        horovod_timeline=bool(optional("horovod_timeline", parse_bool)),
        horovod_fusion_threshold_mb=optional("horovod_fusion_threshold_mb", lambda k, v: parse_float(k, v, 0)),
        horovod_cycle_time_ms=optional("horovod_cycle_time_ms", lambda k, v: parse_float(k, v, 0)),
        distribution_instance_groups=optional("sagemaker_distribution_instance_groups", parse_instance_group_names),
        **hang_timeouts(optional),
    )
    if settings.handshake_port > 65535:
        raise ConfigError(f"hyperparameter mpi_handshake_port={settings.handshake_port} is not a TCP port")
    return settings, warnings


def hang_timeouts(optional) -> dict:
    """horovod_stall_timeout_s and mpi_progress_timeout_s: seconds, 0 to turn off."""
    stall = optional("horovod_stall_timeout_s", lambda k, v: parse_float(k, v, 0))
    progress = optional("mpi_progress_timeout_s", lambda k, v: parse_float(k, v, 0))
    return {"stall_timeout_s": DEFAULT_STALL_TIMEOUT_S if stall is None else stall,
            "progress_timeout_s": progress or 0.0}


def parse_hyperparameters(data: Any, env: Mapping[str, str], source: str = "hyperparameters.json") -> dict:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a JSON object")
    hps = {str(k): decode_hyperparameter(v) for k, v in data.items()}
    if "SM_HPS" in env:
        try:
            override = json.loads(env["SM_HPS"])
        except ValueError:
            raise ConfigError(f"SM_HPS is not valid JSON: {env['SM_HPS']!r}") from None
        if not isinstance(override, dict):
            raise ConfigError("SM_HPS must be a JSON object")
        hps.update({str(k): decode_hyperparameter(v) for k, v in override.items()})
    return hps


def is_program_hyperparameter(key: str) -> bool:
    """Whether a hyperparameter reaches the program (SM_HPS, its arguments) rather than the launcher."""
    return not key.startswith(LAUNCHER_PREFIXES) and key not in TOOLKIT_RESERVED_KEYS


def load_training_config(env: Mapping[str, str] | None = None) -> TrainingConfig:
    """Read /opt/ml/input/config/*.json (root from SAGEMAKER_BASE_DIR) with SM_* overrides."""
    env = os.environ if env is None else env
    paths = Paths(Path(env.get("SAGEMAKER_BASE_DIR", "/opt/ml")))
    config_dir = paths.config_dir
    return parse_training_config(
        paths,
        resource_data=load_json(config_dir / "resourceconfig.json", required=False),
        hyperparameter_data=load_json(config_dir / "hyperparameters.json", required=False),
        input_data=load_json(config_dir / "inputdataconfig.json", required=False),
        env=env,
    )


def parse_training_config(
    paths: Paths, resource_data: Any, hyperparameter_data: Any, input_data: Any, env: Mapping[str, str]
) -> TrainingConfig:
    resource = parse_resource_config(resource_data, env)
    hps = parse_hyperparameters(hyperparameter_data, env)
    settings, warnings = parse_launcher_settings(hps, env)
    resource = replace(resource, distribution_hosts=resolve_distribution_hosts(
        resource, settings.distribution_instance_groups))
    channels = parse_input_data_config(input_data)
    program_args = {key: format_argument(hps[key]) for key in sorted(hps) if is_program_hyperparameter(key)}
    return TrainingConfig(
        paths=paths,
        resource=resource,
        hyperparameters=hps,
        program_args=program_args,
        settings=settings,
        channels=channels,
        warnings=tuple(warnings),
        raw_resource_config=resource_data if isinstance(resource_data, dict) else {},
        raw_input_data_config=input_data if isinstance(input_data, dict) else {},
    )

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUILTIN_PROGRAMS = ("mnist", "faster_rcnn", "mask_rcnn")

# Hyperparameter prefixes the launcher consumes; keys with them never reach the training program.
LAUNCHER_PREFIXES = ("sagemaker_", "horovod_", "mpi_")

DEFAULT_PEER_TIMEOUT_S = 300.0
DEFAULT_HANDSHAKE_PORT = 7420
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

    @property
    def master_host(self) -> str:
        return self.hosts[0]

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
    custom_mpi_options: tuple[str, ...] = ()
    peer_timeout_s: float = DEFAULT_PEER_TIMEOUT_S
    handshake_port: int = DEFAULT_HANDSHAKE_PORT
    horovod_autotune: bool = False
    horovod_timeline: bool = False
    horovod_fusion_threshold_mb: float | None = None
    horovod_cycle_time_ms: float | None = None
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
    """SDK v2 JSON-encodes every value ('"mnist"', '3', '[1, 2]'); hand-written files use plain strings.

    JSON strings, numbers, lists and objects are decoded; anything that is not valid JSON stays the string
    it was (so 'False' or 'resnet50_v1b' pass through as written). Booleans are never guessed here: the
    typed parsers decide, per key.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text[:1] in ('"', "[", "{"):
        try:
            return json.loads(text)
        except ValueError:
            return value
    return value


def format_argument(value: Any) -> str:
    """How a decoded hyperparameter is passed on the program's command line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


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

    groups = []
    for raw in data.get("instance_groups") or ():
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: each of 'instance_groups' must be an object, got {raw!r}")
        group_hosts = raw.get("hosts") or []
        groups.append(
            InstanceGroup(
                name=_require_str(source, raw, "instance_group_name"),
                instance_type=str(raw.get("instance_type", "")),
                hosts=tuple(group_hosts),
            )
        )
    return ResourceConfig(
        current_host=current_host,
        hosts=tuple(sorted(hosts)),
        network_interface_name=interface or None,
        current_instance_type=data.get("current_instance_type") or None,
        current_group_name=data.get("current_group_name") or None,
        instance_groups=tuple(groups),
    )


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
    "mpi_peer_timeout_s",
    "mpi_handshake_port",
    "horovod_autotune",
    "horovod_timeline",
    "horovod_fusion_threshold_mb",
    "horovod_cycle_time_ms",
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

_KNOB_ENV_ALIASES = {"sagemaker_program": ("SAGEMAKER_PROGRAM", "SM_USER_ENTRY_POINT")}


def _knob(hps: Mapping[str, Any], env: Mapping[str, str], key: str) -> Any:
    if key in hps:
        return hps[key]
    for name in _KNOB_ENV_ALIASES.get(key, (key.upper(),)):
        if name in env:
            return env[name]
    return None


def parse_launcher_settings(hps: Mapping[str, Any], env: Mapping[str, str]) -> tuple[LauncherSettings, list[str]]:
    warnings = [
        f"unknown launcher hyperparameter {key!r} ignored (known: {', '.join(sorted(_KNOWN_KNOBS))})"
        for key in sorted(hps)
        if key.startswith(LAUNCHER_PREFIXES) and key not in _KNOWN_KNOBS and key not in _IGNORED_KNOBS
    ]

    def optional(key, parse):
        value = _knob(hps, env, key)
        return None if value is None or value == "" else parse(key, value)

    custom = _knob(hps, env, "sagemaker_mpi_custom_mpi_options")
    try:
        custom_options = tuple(shlex.split(str(custom))) if custom else ()
    except ValueError as error:
        raise ConfigError(f"hyperparameter sagemaker_mpi_custom_mpi_options={custom!r}: {error}") from None

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
        peer_timeout_s=optional("mpi_peer_timeout_s", lambda k, v: parse_float(k, v, minimum=1))
        or DEFAULT_PEER_TIMEOUT_S,
        handshake_port=optional("mpi_handshake_port", lambda k, v: parse_int(k, v, minimum=1))
        or DEFAULT_HANDSHAKE_PORT,
        horovod_autotune=bool(optional("horovod_autotune", parse_bool)),
        horovod_timeline=bool(optional("horovod_timeline", parse_bool)),
        horovod_fusion_threshold_mb=optional("horovod_fusion_threshold_mb", lambda k, v: parse_float(k, v, 0)),
        horovod_cycle_time_ms=optional("horovod_cycle_time_ms", lambda k, v: parse_float(k, v, 0)),
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
    channels = parse_input_data_config(input_data)
    program_args = {
        key: format_argument(value) for key, value in hps.items() if not key.startswith(LAUNCHER_PREFIXES)
    }
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

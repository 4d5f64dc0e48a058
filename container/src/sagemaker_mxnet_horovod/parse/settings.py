"""The launcher's own settings: hyperparameters with a launcher prefix (or the environment), each declared once
in KNOBS with its parser, into frozen LauncherSettings. The hyperparameter wins over the environment (the key
upper-cased, or the knob's own names), which wins over the default."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.resource_config import parse_instance_group_names
from sagemaker_mxnet_horovod.parse.values import parse_bool, parse_float, parse_int, parse_rank_set

# Hyperparameter prefixes the launcher consumes; keys with them never reach the training program.
LAUNCHER_PREFIXES = ("sagemaker_", "horovod_", "mpi_")

DEFAULT_PEER_TIMEOUT_S = 300.0
DEFAULT_HANDSHAKE_PORT = 7420
# A Horovod collective some ranks wait on while others never submit it ends the job after this long. An hour
# of every other rank idle is far beyond a healthy job's one-rank work (validation or a checkpoint on rank 0,
# a slow first step) and far below SageMaker's default MaxRuntimeInSeconds (a day). See docs/hangs.md.
DEFAULT_STALL_TIMEOUT_S = 3600.0
# The parameter server's scheduler port: AWS's MXNet toolkit's default for its `_ps_port` hyperparameter.
DEFAULT_PS_PORT = 8000


@dataclass(frozen=True)
class LauncherSettings:
    """Knobs the launcher consumes (hyperparameters with a launcher prefix, or the environment)."""

    program: str | None = None
    submit_directory: str | None = None
    mpi_enabled: bool | None = None  # None: decided by the process count
    processes_per_host: int | None = None
    custom_mpi_options: tuple[str, ...] = ()  # for mpirun, without the toolkit's own --NCCL_DEBUG
    nccl_debug: str | None = None  # --NCCL_DEBUG in custom_mpi_options (the toolkit's option)
    parameter_server_enabled: bool = False  # MXNet's own distribution: scheduler, servers, kvstore workers
    parameter_server_num_servers: int | None = None  # servers in all; None: one per host, as AWS's toolkit
    parameter_server_port: int = DEFAULT_PS_PORT  # the scheduler's port (AWS's `_ps_port`)
    parameter_server_verbose: int | None = None  # ps-lite's PS_VERBOSE (AWS's `_ps_verbose`)
    peer_timeout_s: float = DEFAULT_PEER_TIMEOUT_S
    handshake_port: int = DEFAULT_HANDSHAKE_PORT
    horovod_autotune: bool = False
    horovod_timeline: bool = False
    horovod_fusion_threshold_mb: float | None = None
    horovod_cycle_time_ms: float | None = None
    distribution_instance_groups: tuple[str, ...] | None = None  # None: not set (the current host's group)
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S  # 0: Horovod only warns about stalls
    progress_timeout_s: float = 0.0  # 0: off; a rank idle this long (diagnose/progress.py) ends the job
    console_ranks: frozenset[int] | None = None  # the ranks whose output reaches the console; None: all


def text(key: str, value: Any) -> str | None:
    return str(value) if value else None


def tcp_port(key: str, value: Any) -> int:
    port = parse_int(key, value, minimum=1)
    if port > 65535:
        raise ConfigError(f"hyperparameter {key}={port} is not a TCP port")
    return port


def ps_verbosity(key: str, value: Any) -> int:
    level = parse_int(key, value, minimum=0)
    if level > 2:
        raise ConfigError(f"hyperparameter {key}={level}: ps-lite's PS_VERBOSE is 0, 1 or 2")
    return level


def at_least(parse: Callable[..., Any], minimum: float) -> Callable[[str, Any], Any]:
    return lambda key, value: parse(key, value, minimum)


def mpi_options(key: str, value: Any) -> tuple[str, ...]:
    """Split as a shell would, quoting kept (`-x 'MSG=a b'` stays one argument)."""
    if not value:
        return ()
    try:
        return tuple(shlex.split(str(value)))
    except ValueError as error:
        raise ConfigError(f"hyperparameter {key}={value!r}: {error}") from None


@dataclass(frozen=True)
class Knob:
    key: str  # the hyperparameter
    field: str  # the LauncherSettings field it sets
    parse: Callable[[str, Any], Any]  # (key, value) -> the field's value; raises ConfigError naming both
    env: tuple[str, ...] | None = None  # its environment names; None: the key upper-cased

    def raw(self, hps: Mapping[str, Any], env: Mapping[str, str]) -> Any:
        if self.key in hps:
            return hps[self.key]
        names = (self.key.upper(),) if self.env is None else self.env
        return next((env[name] for name in names if name in env), None)


# In the order they are checked: the first invalid one is the error reported.
KNOBS: tuple[Knob, ...] = (
    # SDK v2's distribution={'parameter_server': {'enabled': True}}: MXNet's kvstore 'dist_sync' and friends.
    Knob("sagemaker_parameter_server_enabled", "parameter_server_enabled", parse_bool),
    Knob("sagemaker_parameter_server_num_servers", "parameter_server_num_servers", at_least(parse_int, 1)),
    # AWS's MXNet toolkit's own names (no launcher prefix: as there, they also reach the program).
    Knob("_ps_port", "parameter_server_port", tcp_port, env=()),
    Knob("_ps_verbose", "parameter_server_verbose", ps_verbosity, env=()),
    Knob("sagemaker_mpi_custom_mpi_options", "custom_mpi_options", mpi_options),
    Knob("sagemaker_program", "program", text, env=("SAGEMAKER_PROGRAM", "SM_USER_ENTRY_POINT")),
    Knob("sagemaker_submit_directory", "submit_directory", text),
    Knob("sagemaker_mpi_enabled", "mpi_enabled", parse_bool),
    Knob("sagemaker_mpi_num_of_processes_per_host", "processes_per_host", at_least(parse_int, 1)),
    Knob("mpi_peer_timeout_s", "peer_timeout_s", at_least(parse_float, 1)),
    Knob("mpi_handshake_port", "handshake_port", tcp_port),
    Knob("horovod_autotune", "horovod_autotune", parse_bool),
    # HOROVOD_TIMELINE in the environment is Horovod's own variable (a file path, e.g. AWS's blog posts'
    # /opt/ml/output/timeline.json), passed to the ranks as it is; the knob is a hyperparameter only.
    Knob("horovod_timeline", "horovod_timeline", parse_bool, env=()),
    Knob("horovod_fusion_threshold_mb", "horovod_fusion_threshold_mb", at_least(parse_float, 0)),
    Knob("horovod_cycle_time_ms", "horovod_cycle_time_ms", at_least(parse_float, 0)),
    Knob("sagemaker_distribution_instance_groups", "distribution_instance_groups", parse_instance_group_names),
    Knob("horovod_stall_timeout_s", "stall_timeout_s", at_least(parse_float, 0)),
    Knob("mpi_progress_timeout_s", "progress_timeout_s", at_least(parse_float, 0)),
    Knob("mpi_console_ranks", "console_ranks", parse_rank_set),
)
KNOWN_KEYS = frozenset(knob.key for knob in KNOBS)
# Set by the SDK for every job; meaningless to this launcher, so not worth a warning.
IGNORED_KEYS = frozenset({
    "sagemaker_container_log_level",
    "sagemaker_job_name",
    "sagemaker_region",
    "sagemaker_estimator_class_name",
    "sagemaker_estimator_module",
})


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


def unknown_key_warnings(hps: Mapping[str, Any]) -> list[str]:
    return [f"unknown launcher hyperparameter {key!r} ignored (known: {', '.join(sorted(KNOWN_KEYS))})"
            for key in sorted(hps)
            if key.startswith(LAUNCHER_PREFIXES) and key not in KNOWN_KEYS and key not in IGNORED_KEYS]


def parse_launcher_settings(hps: Mapping[str, Any], env: Mapping[str, str]) -> tuple[LauncherSettings, list[str]]:
    """The settings, and a warning for each unknown launcher key. An empty value counts as not set."""
    values: dict[str, Any] = {}
    for knob in KNOBS:
        raw = knob.raw(hps, env)
        if raw is not None and raw != "":
            parsed = knob.parse(knob.key, raw)
            if parsed is not None:
                values[knob.field] = parsed
    values["nccl_debug"], values["custom_mpi_options"] = split_nccl_debug(values.get("custom_mpi_options", ()))
    check_one_distribution(values)
    return LauncherSettings(**values), unknown_key_warnings(hps)


def check_one_distribution(values: Mapping[str, Any]) -> None:
    """MXNet's parameter servers and Horovod over MPI are two ways to run one job: asking for both is a mistake.
    (A parameter-server knob without the parameter server is the layout's to refuse: a built-in program's
    kvstore=dist_sync switches it on too.)"""
    if values.get("parameter_server_enabled") and values.get("mpi_enabled"):
        raise ConfigError("hyperparameters sagemaker_parameter_server_enabled=true and sagemaker_mpi_enabled=true: "
                          "choose one distribution, MXNet's parameter servers (a kvstore 'dist_sync' script) or "
                          "Horovod over MPI")


"""The launcher's own settings: hyperparameters with a launcher prefix (or the environment), each declared once, as
a field of LauncherSettings: its name, its type, its default and its knob (the hyperparameter, the parser that
checks it, why the launcher has it, its environment variables). The hyperparameter wins over the environment (the
key upper-cased, or the knob's own names), which wins over the default."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import SimpleNamespace
from typing import Any

from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.mpi_options import MpiOptions, parse_mpi_options
from sagemaker_mxnet_horovod.parse.resource_config import parse_instance_group_names
from sagemaker_mxnet_horovod.parse.values import (
    parse_bool,
    parse_float,
    parse_int,
    parse_package_names,
    parse_rank_set,
)

# Hyperparameter prefixes the launcher consumes; keys with them never reach the training program.
LAUNCHER_PREFIXES = ("sagemaker_", "horovod_", "mpi_")


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


GRADIENT_COMPRESSIONS = ("none", "fp16")  # Horovod's MXNet compressors


def gradient_compression(key: str, value: Any) -> str:
    choice = str(value).strip().lower()
    if choice not in GRADIENT_COMPRESSIONS:
        raise ConfigError(f"hyperparameter {key}={value!r}: choose one of {', '.join(GRADIENT_COMPRESSIONS)}")
    return choice


@dataclass(frozen=True)
class Knob:
    """How a setting is given: its hyperparameter, its parser (the value's type, checked: a bad value is a
    ConfigError naming key and value), why the launcher has it, and its environment variables."""

    key: str
    parse: Callable[[str, Any], Any]  # (key, value) -> the field's value; raises ConfigError naming both
    why: str
    env: tuple[str, ...] | None = None  # its environment names; None: the key upper-cased

    def raw(self, hps: Mapping[str, Any], env: Mapping[str, str]) -> Any:
        if self.key in hps:
            return hps[self.key]
        names = (self.key.upper(),) if self.env is None else self.env
        return next((env[name] for name in names if name in env), None)


def knob(key: str, parse: Callable[[str, Any], Any], default: Any, why: str, env: tuple[str, ...] | None = None):
    """A setting's field of LauncherSettings: its default, and its Knob."""
    return field(default=default, metadata={"knob": Knob(key, parse, why, env)})


@dataclass(frozen=True)
class LauncherSettings:
    """The settings the launcher consumes, in the order they are checked: the first invalid one is the error
    reported."""

    parameter_server_enabled: bool = knob(
        "sagemaker_parameter_server_enabled", parse_bool, False,
        "MXNet's own distribution (scheduler, servers, kvstore workers): SDK v2's distribution={'parameter_server': ...}")
    parameter_server_num_servers: int | None = knob(
        "sagemaker_parameter_server_num_servers", at_least(parse_int, 1), None,
        "servers in all; unset: one per host, as AWS's MXNet toolkit")
    # AWS's MXNet toolkit's own names (no launcher prefix: as there, they also reach the program), no variable.
    parameter_server_port: int = knob("_ps_port", tcp_port, 8000, "the scheduler's port, AWS's name and default", env=())
    parameter_server_verbose: int | None = knob("_ps_verbose", ps_verbosity, None, "ps-lite's PS_VERBOSE, AWS's name",
                                                env=())
    custom_mpi_options: MpiOptions = knob(
        "sagemaker_mpi_custom_mpi_options", parse_mpi_options, MpiOptions(),
        "extra mpirun arguments (the toolkit's --NCCL_DEBUG: NCCL_DEBUG on every rank)")
    program: str | None = knob("sagemaker_program", text, None, "the built-in program or the user's entry point",
                               env=("SAGEMAKER_PROGRAM", "SM_USER_ENTRY_POINT"))
    submit_directory: str | None = knob("sagemaker_submit_directory", text, None,
                                        "the user's code: a directory or an s3:// tarball")
    # A user's requirements.txt installs with the image's packages held at their versions (act/requirements.py).
    requirements_replace: frozenset[str] = knob(
        "sagemaker_requirements_replace", parse_package_names, frozenset(),
        "the image's packages a requirements.txt may replace (names, or all: none held); unset: none")
    mpi_enabled: bool | None = knob("sagemaker_mpi_enabled", parse_bool, None,
                                    "MPI or not; unset: MPI when the job has more than one process")
    processes_per_host: int | None = knob("sagemaker_mpi_num_of_processes_per_host", at_least(parse_int, 1), None,
                                          "ranks (or parameter-server workers) per host; unset: one per GPU, else 1")
    peer_timeout_s: float = knob("mpi_peer_timeout_s", at_least(parse_float, 1), 300.0,
                                 "how long the master waits for every worker to check in, and workers for the master")
    handshake_port: int = knob("mpi_handshake_port", tcp_port, 7420, "the master's check-in port")
    horovod_autotune: bool = knob("horovod_autotune", parse_bool, False, "Horovod's autotuning, its log uploaded")
    # HOROVOD_TIMELINE in the environment is Horovod's own variable (a file path, e.g. AWS's blog posts'
    # /opt/ml/output/timeline.json), passed to the ranks as it is; the knob is a hyperparameter only.
    horovod_timeline: bool = knob("horovod_timeline", parse_bool, False, "Horovod's timeline, uploaded", env=())
    horovod_fusion_threshold_mb: float | None = knob("horovod_fusion_threshold_mb", at_least(parse_float, 0), None,
                                                     "HOROVOD_FUSION_THRESHOLD; unset: Horovod's")
    horovod_cycle_time_ms: float | None = knob("horovod_cycle_time_ms", at_least(parse_float, 0), None,
                                               "HOROVOD_CYCLE_TIME; unset: Horovod's")
    # Opt-in: on CPU hosts the casts cost more than the halved bytes save (docs/benchmarks/link-scaling.md).
    horovod_gradient_compression: str = knob(
        "horovod_gradient_compression", gradient_compression, "none",
        "what hvd.DistributedTrainer compresses gradients to where the script does not choose (fp16: half the bytes)")
    # On: a timed step now and then costs under 1% of a step (docs/benchmarks/straggler-overhead.md).
    horovod_straggler_report: bool = knob(
        "horovod_straggler_report", parse_bool, True,
        "which rank the others wait for: hvd.DistributedTrainer's allreduces timed, the verdict in the log, a report")
    horovod_straggler_every_s: float = knob(
        "horovod_straggler_every_s", at_least(parse_float, 0), 10.0,
        "the straggler report times a step about this often (at least 10 steps apart); 0: one step in 10")
    distribution_instance_groups: tuple[str, ...] | None = knob(
        "sagemaker_distribution_instance_groups", parse_instance_group_names, None,
        "the instance groups MPI spans; unset: the current host's group")
    # An hour of every other rank idle is far beyond a healthy job's one-rank work (validation or a checkpoint on
    # rank 0, a slow first step) and far below SageMaker's default MaxRuntimeInSeconds (a day). See docs/hangs.md.
    stall_timeout_s: float = knob("horovod_stall_timeout_s", at_least(parse_float, 0), 3600.0,
                                  "a collective some ranks never submit ends the job after this long; 0: warnings only")
    progress_timeout_s: float = knob("mpi_progress_timeout_s", at_least(parse_float, 0), 0.0,
                                     "a rank idle this long (diagnose/progress.py) ends the job; 0: off")
    console_ranks: frozenset[int] | None = knob("mpi_console_ranks", parse_rank_set, None,
                                                "the ranks whose output reaches the console; unset: all")


# (field, knob) of every setting given by a knob, in the order they are checked.
KNOBS: tuple[tuple[str, Knob], ...] = tuple((f.name, f.metadata["knob"]) for f in fields(LauncherSettings)
                                            if "knob" in f.metadata)
KNOWN_KEYS = frozenset(given.key for _, given in KNOBS)
# Each setting's hyperparameter by its field's name (KEYS.mpi_enabled is "sagemaker_mpi_enabled"): messages name a
# knob through the table, never by retyping its key.
KEYS = SimpleNamespace(**{name: given.key for name, given in KNOBS})


@dataclass(frozen=True)
class SageMakerKey:
    """A hyperparameter SageMaker's SDK or the training toolkit sets: never the program's (no argument, no SM_HPS),
    and never warned about as unknown."""

    key: str
    toolkit_own: bool = True  # in the toolkit's SAGEMAKER_HYPERPARAMETERS: not among SM_FRAMEWORK_PARAMS


# SageMaker's own hyperparameters, the one list (the toolkit's environment, the program's arguments and the
# unknown-key warning read it). Those the launcher consumes are knobs (KEYS); the rest mean nothing to it.
# tests/unit/parse/test_settings.py checks it against the keys retyped from the SDK's source.
SAGEMAKER_KEYS: tuple[SageMakerKey, ...] = (
    SageMakerKey(KEYS.program),
    SageMakerKey(KEYS.submit_directory),
    SageMakerKey("sagemaker_enable_cloudwatch_metrics"),  # SDK v1's Framework sent it for every job
    SageMakerKey("sagemaker_region"),
    SageMakerKey("sagemaker_container_log_level"),
    SageMakerKey("sagemaker_job_name"),
    SageMakerKey("sagemaker_s3_output"),  # the SDK's SAGEMAKER_OUTPUT_LOCATION
    # A hyperparameter tuning job's: which estimator to rebuild (the SDK's HyperparameterTuner).
    SageMakerKey("sagemaker_estimator_class_name", toolkit_own=False),
    SageMakerKey("sagemaker_estimator_module", toolkit_own=False),
    # Without a launcher prefix: the toolkit's module name, and what hyperparameter tuning jobs add.
    SageMakerKey("default_user_module_name"),
    SageMakerKey("_tuning_objective_metric"),
)
SAGEMAKER_KEY_NAMES = frozenset(given.key for given in SAGEMAKER_KEYS)
TOOLKIT_OWN_KEYS = frozenset(given.key for given in SAGEMAKER_KEYS if given.toolkit_own)


def unknown_key_warnings(hps: Mapping[str, Any]) -> list[str]:
    return [f"unknown launcher hyperparameter {key!r} ignored (known: {', '.join(sorted(KNOWN_KEYS))})"
            for key in sorted(hps)
            if key.startswith(LAUNCHER_PREFIXES) and key not in KNOWN_KEYS and key not in SAGEMAKER_KEY_NAMES]


def parse_launcher_settings(hps: Mapping[str, Any], env: Mapping[str, str]) -> tuple[LauncherSettings, list[str]]:
    """The settings, and a warning for each unknown launcher key. An empty value counts as not set."""
    values: dict[str, Any] = {}
    for name, given in KNOBS:
        raw = given.raw(hps, env)
        if raw is not None and raw != "":
            parsed = given.parse(given.key, raw)
            if parsed is not None:
                values[name] = parsed
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


"""A built-in program's launch rules: what the program declares next to its code (a standard-library-only
module the launcher loads by its file path), and which of them the job's arguments switch on."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from sagemaker_mxnet_horovod.core.exits import PlanError
from sagemaker_mxnet_horovod.parse.values import parse_bool

DEFAULT_ENTRYPOINTS_DIR = "/opt/entrypoints"

# Built-in programs with launch rules: their launch modules, relative to the entrypoints directory, in order (a
# later module's declarations add to an earlier one's). Every program's: the kvstore hyperparameter of the
# programs' shared skeleton.
SHARED_LAUNCH_MODULE = "mxnet_programs/launch.py"
LAUNCH_MODULES = {
    "mnist": (SHARED_LAUNCH_MODULE,),
    "faster_rcnn": (SHARED_LAUNCH_MODULE, "mxnet_programs/rcnn/launch.py"),
    "mask_rcnn": (SHARED_LAUNCH_MODULE, "mxnet_programs/rcnn/launch.py"),
}


def _no_environment(program: str, gpu_count: int) -> list[tuple[str, str, str]]:
    return []


@dataclass(frozen=True)
class LaunchRules:
    """What a program's launch module may declare (each name optional; a module is standard library only,
    loaded by its file path, and imports nothing of the launcher):

    environment(program, gpu_count) -> [(variable, value, why), ...]
        Defaults for every rank of `program` (the sagemaker_program name) on a host with `gpu_count` GPUs.
        A variable in the container's environment wins; the start log lists each with its reason.
    SINGLE_PROCESS_WHEN_FALSE = {argument: what the program does then, ...}
        Program arguments that, set false (a strict boolean, as the launcher's own), make the job one process
        on one host without MPI; a job with more hosts, processes or sagemaker_mpi_enabled is refused.
    SINGLE_PROCESS_WHEN = {argument: {value: what the program does then, ...}, ...}
        The same for arguments set to one of these values.
    PARAMETER_SERVER_WHEN = {argument: (value, ...), ...}
        Program arguments that, set to one of these values, make the job a parameter-server job (as
        sagemaker_parameter_server_enabled=true); with sagemaker_parameter_server_enabled=true, such an argument
        set to another value is refused (the servers would serve nobody).
    LOADER_WORKERS = (argument, default)
        The argument that sets each rank's DataLoader worker processes, and its default: a number, or a
        function (gpu_count, ranks_per_host, cores) -> number when the program picks it from its host. The
        launcher's /dev/shm estimate counts them (diagnose/shm.py).
    """

    environment: Callable[[str, int], list[tuple[str, str, str]]] = _no_environment
    single_process_when_false: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    single_process_when: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    parameter_server_when: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    loader_workers: tuple[str, int | Callable[[int, int, int], int]] | None = None


@dataclass(frozen=True)
class SingleProcessRequest:
    """A program argument of SINGLE_PROCESS_WHEN_FALSE that the job sets false, or of SINGLE_PROCESS_WHEN set to
    one of its values."""

    argument: str
    instead: str  # what the program does then
    value: str = "false"

    @property
    def setting(self) -> str:
        return f"{self.argument}={self.value}"


@dataclass(frozen=True)
class ParameterServerRequest:
    """A program argument of PARAMETER_SERVER_WHEN as the job sets it: `value` one of `values` asks for the
    parameter server; another value is refused with it."""

    argument: str
    value: str
    values: tuple[str, ...]

    @property
    def asks(self) -> bool:
        return self.value in self.values

    @property
    def setting(self) -> str:
        return f"{self.argument}={self.value}"


def load_launch_rules(program: str | None, entrypoints_dir: str) -> LaunchRules:
    """The launch rules of a built-in program (None: a user's), from its launch modules (by file path: no
    sys.path change), each adding to the ones before it."""
    if program not in LAUNCH_MODULES:
        return LaunchRules()
    environments, single_false, single_when, parameter_server_when, loader_workers = [], {}, {}, {}, None
    for relative in LAUNCH_MODULES[program]:
        module = load_module(program, Path(entrypoints_dir) / relative)
        if hasattr(module, "environment"):
            environments.append(module.environment)
        single_false.update(getattr(module, "SINGLE_PROCESS_WHEN_FALSE", {}))
        single_when.update({argument: MappingProxyType(dict(values))
                            for argument, values in getattr(module, "SINGLE_PROCESS_WHEN", {}).items()})
        parameter_server_when.update({argument: tuple(values)
                                      for argument, values in getattr(module, "PARAMETER_SERVER_WHEN", {}).items()})
        loader_workers = getattr(module, "LOADER_WORKERS", loader_workers)

    def environment(name: str, gpu_count: int) -> list[tuple[str, str, str]]:
        return [setting for declared in environments for setting in declared(name, gpu_count)]

    return LaunchRules(
        environment=environment if environments else _no_environment,
        single_process_when_false=MappingProxyType(single_false),
        single_process_when=MappingProxyType(single_when),
        parameter_server_when=MappingProxyType(parameter_server_when),
        loader_workers=loader_workers,
    )


def load_module(program: str, path: Path):
    if not path.is_file():
        raise PlanError(f"the launch rules of {program} are missing: no {path}")
    spec = importlib.util.spec_from_file_location(f"launch_rules_{program}_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - a broken module must reach the failure file, named
        raise PlanError(f"the launch rules of {program} in {path} cannot be loaded: "
                        f"{type(error).__name__}: {error}") from error
    return module


def single_process_request(rules: LaunchRules, program_args: Mapping[str, str]) -> SingleProcessRequest | None:
    """The first SINGLE_PROCESS_WHEN_FALSE argument the job sets false, else the first SINGLE_PROCESS_WHEN
    argument set to one of its values, if any."""
    for argument, instead in rules.single_process_when_false.items():
        if argument in program_args and not parse_bool(argument, program_args[argument]):
            return SingleProcessRequest(argument, instead)
    for argument, values in rules.single_process_when.items():
        if program_args.get(argument) in values:
            return SingleProcessRequest(argument, values[program_args[argument]], program_args[argument])
    return None


def parameter_server_request(rules: LaunchRules, program_args: Mapping[str, str]) -> ParameterServerRequest | None:
    """The first PARAMETER_SERVER_WHEN argument the job sets, whatever its value (the layout decides)."""
    for argument, values in rules.parameter_server_when.items():
        if argument in program_args:
            return ParameterServerRequest(argument, program_args[argument], values)
    return None

"""A built-in program's launch rules: what the program declares next to its code (a standard-library-only
module the launcher loads by its file path), and which of them the job's arguments switch on."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from sagemaker_mxnet_horovod.exits import PlanError
from sagemaker_mxnet_horovod.parse.values import parse_bool

DEFAULT_ENTRYPOINTS_DIR = "/opt/entrypoints"

# Built-in programs with launch rules: their launch module, relative to the entrypoints directory. A program
# not listed here (mnist) has none.
LAUNCH_MODULES = {
    "faster_rcnn": "mxnet_programs/rcnn/launch.py",
    "mask_rcnn": "mxnet_programs/rcnn/launch.py",
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
    LOADER_WORKERS = (argument, default)
        The argument that sets each rank's DataLoader worker processes, and its default: a number, or a
        function (gpu_count, ranks_per_host, cores) -> number when the program picks it from its host. The
        launcher's /dev/shm estimate counts them (diagnose/shm.py).
    """

    environment: Callable[[str, int], list[tuple[str, str, str]]] = _no_environment
    single_process_when_false: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    loader_workers: tuple[str, int | Callable[[int, int, int], int]] | None = None


@dataclass(frozen=True)
class SingleProcessRequest:
    """A program argument of SINGLE_PROCESS_WHEN_FALSE that the job sets false."""

    argument: str
    instead: str  # what the program does then


def load_launch_rules(program: str | None, entrypoints_dir: str) -> LaunchRules:
    """The launch rules of a built-in program (None: a user's), from its launch module (by file path: no
    sys.path change)."""
    if program not in LAUNCH_MODULES:
        return LaunchRules()
    path = Path(entrypoints_dir) / LAUNCH_MODULES[program]
    if not path.is_file():
        raise PlanError(f"the launch rules of {program} are missing: no {path}")
    spec = importlib.util.spec_from_file_location(f"launch_rules_{program}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - a broken module must reach the failure file, named
        raise PlanError(f"the launch rules of {program} in {path} cannot be loaded: "
                        f"{type(error).__name__}: {error}") from error
    return LaunchRules(
        environment=getattr(module, "environment", _no_environment),
        single_process_when_false=MappingProxyType(dict(getattr(module, "SINGLE_PROCESS_WHEN_FALSE", {}))),
        loader_workers=getattr(module, "LOADER_WORKERS", None),
    )


def single_process_request(rules: LaunchRules, program_args: Mapping[str, str]) -> SingleProcessRequest | None:
    """The first SINGLE_PROCESS_WHEN_FALSE argument the job sets false, if any."""
    for argument, instead in rules.single_process_when_false.items():
        if argument in program_args and not parse_bool(argument, program_args[argument]):
            return SingleProcessRequest(argument, instead)
    return None

"""The program every rank runs, a built-in one or the user's script, and the launch rules a built-in program
declares next to its code."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from sagemaker_mxnet_horovod.config import BUILTIN_PROGRAMS, ConfigError, TrainingConfig, command_line_arguments

DEFAULT_ENTRYPOINTS_DIR = "/opt/entrypoints"

# Built-in programs with launch rules: their launch module, relative to the entrypoints directory. A program
# not listed here (mnist) has none.
LAUNCH_MODULES = {
    "faster_rcnn": "mxnet_programs/rcnn/launch.py",
    "mask_rcnn": "mxnet_programs/rcnn/launch.py",
}


class PlanError(ConfigError):
    """The configuration is valid JSON but cannot be run on these hosts."""


@dataclass(frozen=True)
class Program:
    name: str
    argv: tuple[str, ...]  # the program and its arguments, as each rank runs it
    builtin: bool
    submit_directory: str | None = None  # local dir or s3:// tarball to fetch into code_dir first
    code_dir: str | None = None
    kind: str = "script"  # a user's entry point: "script" (python FILE), "package" (python -m) or "command"


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
    """

    environment: Callable[[str, int], list[tuple[str, str, str]]] = _no_environment
    single_process_when_false: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


def program_name_of(config: TrainingConfig) -> str | None:
    """The built-in program's name, or None for a user script."""
    return config.settings.program if config.settings.submit_directory is None else None


def load_launch_rules(program: str | None, entrypoints_dir: str) -> LaunchRules:
    """The launch rules of a built-in program, from its launch module (by file path: no sys.path change)."""
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
    )


def user_entry_point_kind(name: str, code_is_package: bool) -> str:
    """The toolkit's rule (sagemaker_training._entry_point_type), so a user's entry point runs as it did there:
    a `.sh` file is a command; else a code directory with a setup.py is a Python package, run as a module after
    `pip install .`; else a `.py` file is a script; anything else is a command."""
    if name.endswith(".sh"):
        return "command"
    if code_is_package:
        return "package"
    return "script" if name.endswith(".py") else "command"


def resolve_program(config: TrainingConfig, python: str, entrypoints_dir: str,
                    code_is_package: bool = False) -> Program:
    """The program every rank runs. `code_is_package`: the user's code directory has a setup.py (known once the
    code is fetched; the launcher plans again if fetching changed it)."""
    settings = config.settings
    name = settings.program
    args = command_line_arguments(config.program_args)
    if not name:
        raise PlanError(
            "no program to run: set hyperparameter sagemaker_program to one of "
            f"{', '.join(BUILTIN_PROGRAMS)} or to a script in sagemaker_submit_directory"
        )
    if settings.submit_directory is None:
        if name not in BUILTIN_PROGRAMS:
            raise PlanError(
                f"unknown program {name!r}: use one of {', '.join(BUILTIN_PROGRAMS)}, "
                "or set sagemaker_submit_directory to the directory or s3:// tarball that contains it"
            )
        script = str(Path(entrypoints_dir) / f"{name}.py")
        return Program(name=name, argv=(python, script, *args), builtin=True)
    if Path(name).is_absolute() or ".." in Path(name).parts:
        raise PlanError(f"sagemaker_program {name!r} must be a path inside sagemaker_submit_directory")
    code_dir = str(config.paths.code_dir)
    script = str(Path(code_dir) / name)
    kind = user_entry_point_kind(name, code_is_package)
    if kind == "package":
        argv = (python, "-m", name.removesuffix(".py"), *args)
    elif kind == "script":
        argv = (python, script, *args)
    else:
        # As the toolkit: through sh from the code directory (each rank's working directory), so the file's own
        # #! line picks its interpreter, and a file without one runs with sh. install_user_code makes it executable.
        argv = ("/bin/sh", "-c", './"$0" "$@"', name, *args)
    return Program(name=name, argv=argv, builtin=False, submit_directory=settings.submit_directory,
                   code_dir=code_dir, kind=kind)

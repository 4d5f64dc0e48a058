"""The program every rank runs: a built-in one or the user's entry point (script, Python package or command),
as the sagemaker-training toolkit runs it."""

from __future__ import annotations

from pathlib import Path

from sagemaker_mxnet_horovod.core.exits import PlanError
from sagemaker_mxnet_horovod.core.plan import Program
from sagemaker_mxnet_horovod.parse.settings import KEYS
from sagemaker_mxnet_horovod.parse.training_config import BUILTIN_PROGRAMS, TrainingConfig


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
    args = config.program_argv
    if not name:
        raise PlanError(
            f"no program to run: set hyperparameter {KEYS.program} to one of "
            f"{', '.join(BUILTIN_PROGRAMS)} or to a script in {KEYS.submit_directory}"
        )
    if settings.submit_directory is None:
        if name not in BUILTIN_PROGRAMS:
            raise PlanError(
                f"unknown program {name!r}: use one of {', '.join(BUILTIN_PROGRAMS)}, "
                f"or set {KEYS.submit_directory} to the directory or s3:// tarball that contains it"
            )
        script = str(Path(entrypoints_dir) / f"{name}.py")
        return Program(name=name, argv=(python, script, *args), builtin=True)
    if Path(name).is_absolute() or ".." in Path(name).parts:
        raise PlanError(f"{KEYS.program} {name!r} must be a path inside {KEYS.submit_directory}")
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
                   code_dir=code_dir, kind=kind, requirements_replace=settings.requirements_replace)

"""Ready this host before the job starts, whatever its backend: the directories the job writes to, the user's code
fetched and installed as the sagemaker-training toolkit does."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sagemaker_mxnet_horovod.act.requirements import install_requirements
from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.core.plan import Plan, Program
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.settings import KEYS


def is_python_package(code_dir: Path) -> bool:
    """The toolkit's test for a Python-package entry point: a setup.py in the code directory."""
    return (code_dir / "setup.py").is_file()


def prepare_host(plan: Plan, paths: Paths, replan: Callable[[], Plan], log: Callable[[str], None]) -> Plan:
    """Directories, the user's code. Returns the plan to run: planned again (replan) when the fetched code turns
    out to be a Python package, or not to be one, after all."""
    for directory in (paths.model_dir, paths.output_data_dir, paths.code_dir, Path(plan.run_dir)):
        directory.mkdir(parents=True, exist_ok=True)
    if not plan.program.builtin:
        fetch_user_code(plan.program)
        if (plan.program.kind == "package") != is_python_package(paths.code_dir):
            plan = replan()  # the fetched code has (or lacks) a setup.py: run it so
            log(f"entry point: {' '.join(plan.program.argv)}")
        install_user_code(plan, log)
    return plan


def fetch_user_code(program: Program) -> None:
    """The user's code into the code directory: reuse the toolkit's download/extract (S3 or local)."""
    # The toolkit is imported only when there is work for it: it pulls in boto3 (~0.2 s of every start).
    if program.submit_directory != program.code_dir:
        from sagemaker_training import files

        files.download_and_extract(program.submit_directory, program.code_dir)


def install_user_code(plan: Plan, log: Callable[[str], None]) -> None:
    """As the toolkit, for the entry point's kind (decided on the fetched code): a package is pip-installed with
    its requirements.txt, a script gets its requirements.txt (act/requirements.py: with the image's packages held),
    a command is made executable."""
    program = plan.program
    code_dir = Path(program.code_dir)
    package = program.kind == "package"
    if package or (code_dir / "requirements.txt").exists():
        install_requirements(program, plan.env, plan.run_dir, log)
    script = code_dir / program.name
    if not package and not script.exists():
        raise ConfigError(f"{KEYS.program} {program.name!r} is not in {KEYS.submit_directory} "
                          f"{program.submit_directory} (contents: {sorted(p.name for p in code_dir.iterdir())})")
    if program.kind == "command" and not os.access(script, os.X_OK):  # run through its #! line, as the toolkit
        script.chmod(script.stat().st_mode | 0o111)

"""Run one rank's program (an MPI rank, a parameter-server worker, the single process): every backend's ranks end
here, after what the backend's own start gives them (the MPI backend's: backends/mpi/rank_env.py).

- mpirun --tag-output tags every chunk a rank writes. Block-buffered output arrives late, unbuffered
  output (PYTHONUNBUFFERED) arrives in pieces and gets tagged mid-line, breaking metric regexes. A Python
  program therefore runs in this interpreter with line-buffered stdout/stderr; anything else is exec'd.
- The program starts in WORKDIR (the code directory), as under the sagemaker-training toolkit: scripts open
  files next to them. mpirun would start ranks on other hosts in its own working directory.
- A Python program's stacks can be asked for at any time (stacks.py): a thread of the rank's own writes them.
- With SMMH_PROGRESS_TIMEOUT_S (mpi_progress_timeout_s), a Python program runs under the progress watch
  (progress.py): no output, collective or computing for that long ends the rank, saying where it blocked,
  once the launcher has taken every rank's stacks. A parameter-server worker waiting on MXNet's engine counts as
  alive only while it computes (progress.py).
- A parameter-server worker (DMLC_ROLE=worker) whose Python program fails ends at once: the exception's traceback
  is printed and the process exits 1 (or the code it gave sys.exit) without the interpreter's shutdown, where
  MXNet's kvstore waits in ps-lite's barrier for every other worker, which wait for its gradients: a failed worker
  would stay alive forever, and its failure unseen.

usage: python -m sagemaker_mxnet_horovod.act.rank_program RUN_DIR WORKDIR -- PROGRAM [ARGS...]
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sagemaker_mxnet_horovod.core.plan import Plan

# What a parameter-server worker says on stderr when its script has returned: the launcher's watch of workers that
# finish apart (backends/parameter_server/roles.py) starts then, not when the process exits after ps-lite's barrier.
SCRIPT_RETURNED = "train: the script returned; waiting in ps-lite's barrier at exit for every other worker"
# Set by Open MPI for each rank (or only meaningful to mpirun itself): never given from the launcher's environment.
SKIP_PREFIXES = ("OMPI_", "PMIX_", "OPAL_", "ORTE_")


def rank_environment(plan: Plan, base_env: Mapping[str, str]) -> dict:
    """What every rank on this host should see: this container's own environment (SageMaker gives each
    container the job's `environment`, but sshd starts remote ranks with an empty one and mpirun exports
    only the master's), the launcher's defaults, and this host's SM_* values. What the MPI backend's ranks apply
    from a file (backends/mpi/rank_env.py), the environment itself of a parameter-server host's processes."""
    merged = {**base_env, **plan.env, **plan.rank_env}
    return {k: v for k, v in merged.items() if not k.startswith(SKIP_PREFIXES)}


def parse_command_line(argv: list, module: str) -> tuple[str, str, list]:
    """(RUN_DIR, WORKDIR, PROGRAM...) of `python -m MODULE RUN_DIR WORKDIR -- PROGRAM [ARGS...]`."""
    if len(argv) < 4 or argv[2] != "--":
        sys.exit(f"usage: python -m {module} RUN_DIR WORKDIR -- PROGRAM [ARGS...]")
    return argv[0], argv[1], argv[3:]


def run(run_dir: str, workdir: str, program: list) -> None:
    """The program in WORKDIR: a Python script in this interpreter, anything else exec'd in place."""
    try:
        os.chdir(workdir)
    except OSError as error:
        sys.exit(f"rank_program: cannot start the program in {workdir}: {error.strerror}")
    if program[0] == sys.executable and len(program) > 1 and program[1].endswith(".py"):
        run_script(run_dir, program)
    else:
        os.execvp(program[0], program)


def run_script(run_dir: str, program: list) -> None:
    script = program[1]
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True, write_through=False)
    # An MPI rank, or a parameter-server worker (the launcher's number for it).
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("SMMH_WORKER_RANK") or "0")
    host = os.environ.get("SM_CURRENT_HOST", "?")
    from sagemaker_mxnet_horovod.act import stacks

    dumper = stacks.install(run_dir, rank, host)
    progress_timeout = float(os.environ.get("SMMH_PROGRESS_TIMEOUT_S") or 0)
    if progress_timeout > 0:
        from sagemaker_mxnet_horovod.diagnose import progress

        progress.start(progress_timeout, rank, host, before_exit=dumper and (
            lambda: stacks.ask_launcher(run_dir, f"no progress on rank {rank} ({host})", dumper)),
            engine_waits_need_cpu=os.environ.get("DMLC_ROLE") == "worker")
    sys.argv = program[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    if os.environ.get("DMLC_ROLE") == "worker":
        run_parameter_server_worker(script)
    else:
        runpy.run_path(script, run_name="__main__")


def run_parameter_server_worker(script: str) -> None:
    """The script; a failure ends the process now, with the traceback or message Python would print."""
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code in (None, 0):
            say_returned()
            raise
        code = stop.code if isinstance(stop.code, int) else 1
        if not isinstance(stop.code, int):
            print(stop.code, file=sys.stderr)
        exit_now(code)
    except BaseException:  # noqa: BLE001 - whatever ends the script ends the process, as Python would report it
        traceback.print_exc()
        exit_now(1)
    say_returned()


def say_returned() -> None:
    print(SCRIPT_RETURNED, file=sys.stderr, flush=True)


def exit_now(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list) -> None:
    run(*parse_command_line(argv, "sagemaker_mxnet_horovod.act.rank_program"))


if __name__ == "__main__":
    main(sys.argv[1:])

"""Run one rank of the job: this host's SM_* environment, line-buffered output, then the program.

- Ranks on other hosts are started by sshd with an empty environment plus what mpirun exports from the
  master, so SM_CURRENT_HOST would name the master on every host (the sagemaker-training toolkit has this
  bug) and the container's own variables (the job's `environment`) would be missing. Each host's launcher
  writes this host's environment to RUN_DIR/rank-env.json before the job starts; it is applied here,
  except Open MPI's per-rank variables.
- mpirun --tag-output tags every chunk a rank writes. Block-buffered output arrives late, unbuffered
  output (PYTHONUNBUFFERED) arrives in pieces and gets tagged mid-line, breaking metric regexes. A Python
  program therefore runs in this interpreter with line-buffered stdout/stderr; anything else is exec'd.
- The program starts in WORKDIR (the code directory), as under the sagemaker-training toolkit: scripts open
  files next to them. mpirun would start ranks on other hosts in its own working directory.
- With HOROVOD_CONTROLLER=gloo (the MPI backend sets it when the job's environment asks for Gloo:
  backends/mpi/gloo.py), the rank gets its own HOROVOD_RANK, _SIZE, _LOCAL_*, _CROSS_* and _HOSTNAME from Open
  MPI's numbers (gloo_ranks.py), as horovodrun --gloo would give them, for Horovod's Gloo rendezvous.
- A Python program's stacks can be asked for at any time (stacks.py): a thread of the rank's own writes them.
- With SMMH_PROGRESS_TIMEOUT_S (mpi_progress_timeout_s), a Python program runs under the progress watch
  (progress.py): no output, collective or computing for that long ends the rank, saying where it blocked,
  once the launcher has taken every rank's stacks. A parameter-server worker waiting on MXNet's engine counts as
  alive only while it computes (progress.py).
- A parameter-server worker (DMLC_ROLE=worker) whose Python program fails ends at once: the exception's traceback
  is printed and the process exits 1 (or the code it gave sys.exit) without the interpreter's shutdown, where
  MXNet's kvstore waits in ps-lite's barrier for every other worker, which wait for its gradients: a failed worker
  would stay alive forever, and its failure unseen.

usage: python -m sagemaker_mxnet_horovod.act.rank_env RUN_DIR WORKDIR -- PROGRAM [ARGS...]
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sagemaker_mxnet_horovod.core.plan import Plan

RANK_ENV_FILE = "rank-env.json"
# What a parameter-server worker says on stderr when its script has returned: the launcher's watch of workers that
# finish apart (backends/parameter_server/roles.py) starts then, not when the process exits after ps-lite's barrier.
SCRIPT_RETURNED = "train: the script returned; waiting in ps-lite's barrier at exit for every other worker"
# Set by Open MPI for each rank (or only meaningful to mpirun itself): never overridden from the file.
SKIP_PREFIXES = ("OMPI_", "PMIX_", "OPAL_", "ORTE_")


def rank_environment(plan: Plan, base_env: Mapping[str, str]) -> dict:
    """What every rank on this host should see: this container's own environment (SageMaker gives each
    container the job's `environment`, but sshd starts remote ranks with an empty one and mpirun exports
    only the master's), the launcher's defaults, and this host's SM_* values. Written to RANK_ENV_FILE for MPI's
    ranks, the environment itself of a parameter-server host's processes."""
    merged = {**base_env, **plan.env, **plan.rank_env}
    return {k: v for k, v in merged.items() if not k.startswith(SKIP_PREFIXES)}


def write_rank_environment(plan: Plan, base_env: Mapping[str, str]) -> None:
    """RUN_DIR/RANK_ENV_FILE, which each rank that mpirun starts applies (main), readable by root only: the
    container's environment may hold credentials."""
    path = os.path.join(plan.run_dir, RANK_ENV_FILE)
    os.makedirs(plan.run_dir, exist_ok=True)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        json.dump(rank_environment(plan, base_env), file)


def main(argv: list) -> None:
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: python -m sagemaker_mxnet_horovod.act.rank_env RUN_DIR WORKDIR -- PROGRAM [ARGS...]")
    run_dir, workdir, program = argv[0], argv[1], argv[3:]
    try:
        with open(os.path.join(run_dir, RANK_ENV_FILE)) as f:
            os.environ.update({k: v for k, v in json.load(f).items() if not k.startswith(SKIP_PREFIXES)})
    except FileNotFoundError:
        pass  # not started by the launcher (plain mpirun): the exported environment is all there is
    set_gloo_rank_variables()
    try:
        os.chdir(workdir)
    except OSError as error:
        sys.exit(f"rank_env: cannot start the program in {workdir}: {error.strerror}")
    if program[0] == sys.executable and len(program) > 1 and program[1].endswith(".py"):
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
    else:
        os.execvp(program[0], program)


def set_gloo_rank_variables() -> None:
    """A rank that mpirun started for Horovod's Gloo controller: its own numbers, for the rendezvous."""
    from sagemaker_mxnet_horovod.act import gloo_ranks

    if not gloo_ranks.asks_for_gloo(os.environ, gloo_ranks.CONTROLLER) or "OMPI_COMM_WORLD_RANK" not in os.environ:
        return
    try:
        os.environ.update(gloo_ranks.open_mpi_rank_variables(os.environ))
    except (KeyError, ValueError) as error:
        sys.exit(f"rank_env: {error}")


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


if __name__ == "__main__":
    main(sys.argv[1:])

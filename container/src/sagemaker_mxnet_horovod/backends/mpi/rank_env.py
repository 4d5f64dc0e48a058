"""Start one of mpirun's ranks: this host's environment, Horovod's Gloo numbers when the job runs over Gloo, then the
program (act/rank_program.py, as every backend's ranks run it). The module mpirun starts, on every host.

- Ranks on other hosts are started by sshd with an empty environment plus what mpirun exports from the
  master, so SM_CURRENT_HOST would name the master on every host (the sagemaker-training toolkit has this
  bug) and the container's own variables (the job's `environment`) would be missing. Each host's launcher
  writes this host's environment to RUN_DIR/rank-env.json before the job starts; it is applied here,
  except Open MPI's per-rank variables.
- With HOROVOD_CONTROLLER=gloo (the MPI backend sets it when the job's environment asks for Gloo: gloo.py), the
  rank gets its own HOROVOD_RANK, _SIZE, _LOCAL_*, _CROSS_* and _HOSTNAME from Open MPI's numbers (gloo_ranks.py),
  as horovodrun --gloo would give them, for Horovod's Gloo rendezvous.

Every rank imports this package to start: backends/mpi/__init__.py imports nothing (the backend's planning and run
are backend.py's), and this module only the standard library and what the rank needs.

usage: python -m sagemaker_mxnet_horovod.backends.mpi.rank_env RUN_DIR WORKDIR -- PROGRAM [ARGS...]
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sagemaker_mxnet_horovod.act import rank_program
from sagemaker_mxnet_horovod.act.rank_program import SKIP_PREFIXES, rank_environment

if TYPE_CHECKING:
    from sagemaker_mxnet_horovod.core.plan import Plan

RANK_ENV_FILE = "rank-env.json"


def write_rank_environment(plan: Plan, base_env: Mapping[str, str]) -> None:
    """RUN_DIR/RANK_ENV_FILE, which each rank that mpirun starts applies (main), readable by root only: the
    container's environment may hold credentials."""
    path = os.path.join(plan.run_dir, RANK_ENV_FILE)
    os.makedirs(plan.run_dir, exist_ok=True)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        json.dump(rank_environment(plan, base_env), file)


def main(argv: list) -> None:
    run_dir, workdir, program = rank_program.parse_command_line(argv, "sagemaker_mxnet_horovod.backends.mpi.rank_env")
    try:
        with open(os.path.join(run_dir, RANK_ENV_FILE)) as f:
            os.environ.update({k: v for k, v in json.load(f).items() if not k.startswith(SKIP_PREFIXES)})
    except FileNotFoundError:
        pass  # not started by the launcher (plain mpirun): the exported environment is all there is
    set_gloo_rank_variables()
    rank_program.run(run_dir, workdir, program)


def set_gloo_rank_variables() -> None:
    """A rank that mpirun started for Horovod's Gloo controller: its own numbers, for the rendezvous."""
    from sagemaker_mxnet_horovod.backends.mpi import gloo_ranks

    if not gloo_ranks.asks_for_gloo(os.environ, gloo_ranks.CONTROLLER) or "OMPI_COMM_WORLD_RANK" not in os.environ:
        return
    try:
        os.environ.update(gloo_ranks.open_mpi_rank_variables(os.environ))
    except (KeyError, ValueError) as error:
        sys.exit(f"rank_env: {error}")


if __name__ == "__main__":
    main(sys.argv[1:])

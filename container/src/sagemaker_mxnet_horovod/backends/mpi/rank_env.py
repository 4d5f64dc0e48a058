"""Start one of mpirun's ranks: this host's environment, Horovod's Gloo numbers when the job runs over Gloo, then the
program (act/rank_program.py, as every backend's ranks run it). The module mpirun starts, on every host.

- Ranks on other hosts are started by sshd with an empty environment plus what mpirun exports from the
  master, so SM_CURRENT_HOST would name the master on every host (the sagemaker-training toolkit has this
  bug) and the container's own variables (the job's `environment`) would be missing. Each host's launcher
  writes this host's environment to RUN_DIR/rank-env.json before the job starts; it is applied here,
  except Open MPI's per-rank variables.
- When the plan runs Horovod over Gloo (it has a Gloo rendezvous, decided once by gloo.py, and the file says so), the
  rank gets its own HOROVOD_RANK, _SIZE, _LOCAL_*, _CROSS_* and _HOSTNAME from Open MPI's numbers (gloo_ranks.py),
  as horovodrun --gloo would give them, for Horovod's Gloo rendezvous.

Every rank imports this package to start: backends/mpi/__init__.py imports nothing (the backend's planning and run
are backend.py's), and this module only the standard library and what the rank needs.

usage: python -m sagemaker_mxnet_horovod.backends.mpi.rank_env RUN_DIR WORKDIR -- PROGRAM [ARGS...]
"""

from __future__ import annotations

import dataclasses
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
    """RUN_DIR/RANK_ENV_FILE, which each rank that mpirun starts applies (main): this host's environment for every
    rank, and the plan's Gloo rendezvous (or null). Readable by root only: the container's environment may hold
    credentials."""
    path = os.path.join(plan.run_dir, RANK_ENV_FILE)
    os.makedirs(plan.run_dir, exist_ok=True)
    rendezvous = plan.gloo_rendezvous
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        json.dump({"environment": rank_environment(plan, base_env),
                   "gloo_rendezvous": dataclasses.asdict(rendezvous) if rendezvous else None}, file)


def main(argv: list) -> None:
    run_dir, workdir, program = rank_program.parse_command_line(argv, "sagemaker_mxnet_horovod.backends.mpi.rank_env")
    try:
        with open(os.path.join(run_dir, RANK_ENV_FILE)) as f:
            written = json.load(f)
    except FileNotFoundError:
        written = {}  # not started by the launcher (plain mpirun): the exported environment is all there is
    os.environ.update({k: v for k, v in written.get("environment", {}).items() if not k.startswith(SKIP_PREFIXES)})
    if written.get("gloo_rendezvous") and "OMPI_COMM_WORLD_RANK" in os.environ:
        set_gloo_rank_variables()
    rank_program.run(run_dir, workdir, program)


def set_gloo_rank_variables() -> None:
    """A rank that mpirun started for Horovod's Gloo: its own numbers, for the rendezvous."""
    from sagemaker_mxnet_horovod.backends.mpi import gloo_ranks

    try:
        os.environ.update(gloo_ranks.open_mpi_rank_variables(os.environ))
    except (KeyError, ValueError) as error:
        sys.exit(f"rank_env: {error}")


if __name__ == "__main__":
    main(sys.argv[1:])

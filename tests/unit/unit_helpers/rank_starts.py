"""A rank started as a backend starts it, as a real process: `python -m MODULE RUN_DIR WORKDIR -- PROGRAM...`, with
MODULE the generic rank program (act/rank_program.py) or the MPI backend's start (backends/mpi/rank_env.py). A
uniquely named helper, as every helper under tests/."""

import os
import subprocess
import sys

from . import unit_paths

RANK_PROGRAM = "sagemaker_mxnet_horovod.act.rank_program"
MPI_RANK_ENV = "sagemaker_mxnet_horovod.backends.mpi.rank_env"


def start_rank(module, run_dir, workdir, *program, env=None):
    """Started elsewhere (cwd /), as mpirun starts ranks on other hosts, with the exported environment `env`. Returns
    the process and its output."""
    process = subprocess.Popen([sys.executable, "-m", module, str(run_dir), str(workdir), *program], cwd="/",
                               env={**os.environ, "PYTHONPATH": str(unit_paths.SRC), **(env or {})},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.communicate(timeout=60)
    return process, stdout, stderr

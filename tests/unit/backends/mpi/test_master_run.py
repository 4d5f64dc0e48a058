"""master_run.py, as a real process: a stop ends the job with 143, whatever mpirun then exits with; the master's
gather and release through the backend's run: test_backend_run.py. The master with real workers and mpirun runs
across real containers (tests/integration, tests/faults)."""

import dataclasses
import signal
import sys

import pytest
from sagemaker_mxnet_horovod.backends.mpi.master_run import MasterRun
from unit_helpers.plan_cases import config, plan

pytestmark = pytest.mark.usefixtures("restore_signal_handlers")  # the run installs its own handlers


def test_a_stopped_job_exits_143_whatever_mpirun_exits_with(tmp_path):
    # mpirun, stood in for by a program: it stops the launcher (SageMaker's SIGTERM reaching this process, the
    # test's) and exits 1, as mpirun does once its ranks have checkpointed and exited. This exited 1 before: the
    # MPI path took mpirun's status for the job's.
    p = plan(config(hosts=("algo-1",), hps={"sagemaker_mpi_num_of_processes_per_host": "2"}))
    assert (p.backend, p.workers) == ("mpi", ())
    code = "import os, signal, sys; os.kill(os.getppid(), signal.SIGTERM); sys.exit(1)"
    p = dataclasses.replace(p, command=(sys.executable, "-c", code), run_dir=str(tmp_path / "run"),
                            output_data_dir=str(tmp_path / "data"))
    outcome = MasterRun(p, {}, "", tmp_path / "failure").run()
    assert (outcome.exit_code, outcome.failure.signal_number) == (143, signal.SIGTERM)
    assert outcome.failure.cause == "stopped by SIGTERM (SageMaker stop or spot interruption); the job exited with code 1"

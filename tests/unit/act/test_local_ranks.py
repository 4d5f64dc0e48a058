"""local_ranks.py: the ranks are found as the children of the MPI daemon, real processes named as Open MPI's.

signal_local_ranks is not run here: on a shared host /proc shows other jobs' ranks too. tests/integration and
tests/faults stop ranks inside real containers."""

import os
import shutil
import signal
import subprocess

from sagemaker_mxnet_horovod.act.local_ranks import local_rank_pids, mpi_daemon_running


def test_the_ranks_are_the_children_of_the_mpi_daemon(tmp_path):
    # Copies of sh named as Open MPI's daemon on a worker and as a rank whose name holds parentheses (the
    # name in /proc/PID/stat is in parentheses too).
    daemon, rank_program = tmp_path / "orted", tmp_path / "rank) 1 (x"
    shutil.copy("/bin/sh", daemon)
    shutil.copy("/bin/sh", rank_program)
    script = f"'{rank_program}' -c 'sleep 60' & echo $!; sleep 60 & echo $!; wait"
    daemon_process = subprocess.Popen([str(daemon), "-c", script], stdout=subprocess.PIPE, text=True,
                                      start_new_session=True)
    other = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        ranks = {int(daemon_process.stdout.readline()), int(daemon_process.stdout.readline())}
        not_a_rank = int(other.stdout.readline())
        assert mpi_daemon_running()
        found = set(local_rank_pids())
        assert ranks <= found
        assert not_a_rank not in found and daemon_process.pid not in found
    finally:
        for process in (daemon_process, other):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

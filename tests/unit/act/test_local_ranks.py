"""local_ranks.py: the ranks are found as the children of the MPI daemon, real processes named as Open MPI's.

signal_local_ranks is not run here: on a shared host it would signal other jobs' ranks in this PID namespace.
tests/integration and tests/faults stop ranks inside real containers."""

import os
import shutil
import signal
import subprocess
import time

import pytest
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


def _stat(pid: str) -> tuple[str, int] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.index("(") + 1: stat.rindex(")")], int(stat[stat.rindex(")") + 2:].split()[1])


def _child(parent: int, comm: str, deadline: float) -> int:
    while time.monotonic() < deadline:
        for entry in filter(str.isdigit, os.listdir("/proc")):
            if _stat(entry) == (comm, parent):
                return int(entry)
        time.sleep(0.05)
    raise AssertionError(f"no {comm} child of {parent} within 10 s")


def test_ranks_in_another_pid_namespace_are_another_containers(tmp_path):
    # A container's daemon and rank as the host sees them: a stop of a launcher run on the host (these tests, run
    # while jobs train in containers) SIGTERMed those jobs' ranks before.
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    daemon = tmp_path / "orted"
    shutil.copy("/bin/sh", daemon)
    container = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", str(daemon), "-c", "sleep 60; :"],
                                 stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        try:
            contained_daemon = _child(container.pid, "orted", time.monotonic() + 10)
        except AssertionError:
            container.kill()
            pytest.skip(f"cannot make a PID namespace here: {container.communicate()[1].strip()}")
        contained_rank = _child(contained_daemon, "sleep", time.monotonic() + 10)
        assert contained_rank not in local_rank_pids()
    finally:
        os.killpg(container.pid, signal.SIGKILL)
        container.wait()

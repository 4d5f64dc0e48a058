"""This host's MPI ranks, found through /proc: the children of Open MPI's daemon (mpirun on the master, orted on
workers, where sshd started it rather than the launcher), so the launcher can signal them and tell whether
mpirun's daemon runs here."""

from __future__ import annotations

import os

_DAEMONS = {"mpirun", "orterun", "orted", "prterun", "prted"}


def _pid_namespace(pid: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _processes() -> dict[int, tuple[str, int]]:
    """pid -> (comm, ppid) of every process in this container: in this process's PID namespace. Where the
    launcher shares a machine's (a test on the host), other containers' ranks are in /proc too, and a stop
    here must not reach them."""
    processes: dict[int, tuple[str, int]] = {}
    own_namespace = _pid_namespace("self")
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or (own_namespace and _pid_namespace(entry) != own_namespace):
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # comm is in parentheses and may contain spaces; ppid is the second field after it.
        comm = stat[stat.index("(") + 1: stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        processes[int(entry)] = (comm, ppid)
    return processes


def mpi_daemon_running() -> bool:
    return any(comm in _DAEMONS for comm, _ in _processes().values())


def local_rank_pids() -> list[int]:
    """The MPI ranks on this host: the children of the Open MPI daemon (mpirun on the master, orted on
    workers, where sshd started it, not the launcher)."""
    parents = _processes()
    daemons = {pid for pid, (comm, _) in parents.items() if comm in _DAEMONS}
    return [pid for pid, (_, ppid) in parents.items() if ppid in daemons]


def signal_local_ranks(signum: int) -> list[int]:
    pids = local_rank_pids()
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
    return pids

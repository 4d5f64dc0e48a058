"""Where a launcher's overhead goes in a local job (launcher_overhead, launcher_scale): the ranks' own record of
their program's start and end (the allreduce program of tests/integration/code writes rank-<n>.json), and the phases
between the containers' start and exit, read from the master's log lines and docker's clock."""

import json


def program_seconds(result, ranks: int = 2) -> float:
    if sum(1 for host in result.hosts for _ in (host.root / "model").glob("rank-*.json")) != ranks:
        raise RuntimeError("a rank did not finish:\n" + result.describe())
    first_start, last_end = rank_times(result)
    return last_end - first_start


def rank_times(result) -> tuple[float, float]:
    records = [json.loads(path.read_text()) for host in result.hosts for path in (host.root / "model").glob("rank-*.json")]
    return min(r["started"] for r in records), max(r["finished"] for r in records)


# Where this launcher's overhead goes: (phase, the master's log line that ends it; None: see phases()).
PHASES = (
    "containers start (or the gate) -> launcher logs its plan",
    "plan -> workers checked in (handshake, sshd)",
    "workers in -> first rank's Python runs (mpirun, ssh, orted)",
    "last rank done -> mpirun exits (MPI/Horovod shutdown)",
    "mpirun exits -> workers released",
    "released -> last container exits",
)


def phases(result) -> list[float] | None:
    """Seconds per PHASES entry, by docker's clock and the ranks' own; None if a line is missing."""
    master = result.master
    marks = [master.first_log_time("train: "), master.first_log_time("worker(s) ready in"),
             master.first_log_time("train: job "), master.first_log_time("worker(s) released in")]
    if None in marks:
        return None
    first_start, last_end = rank_times(result)
    container_start = result.hosts_started_at
    container_exit = max(h.finished_at for h in result.hosts)
    plan_at, ready_at, exited_at, released_at = marks
    return [plan_at - container_start, ready_at - plan_at, first_start - ready_at, exited_at - last_end,
            released_at - exited_at, container_exit - released_at]

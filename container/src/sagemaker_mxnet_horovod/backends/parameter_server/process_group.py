"""This host's own processes, supervised together (a parameter-server host: its scheduler, servers and workers).

Each starts in its own session with its own variables on top of the host's environment; its output passes
through with its name in front ("[worker 1] epoch=1 ..."), a worker's only when its rank is among the console's
(mpi_console_ranks), and into its own log (ProcessLogs: output/data/logs/, as an MPI rank's); its last stderr lines
are kept, and its exit is reported as it happens (`on_exit`), so the host can act on the first one. Stopping is by role: workers first (a
program checkpoints on SIGTERM while the servers still serve it), then the rest, SIGKILL to any whose session
outlives the grace.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sagemaker_mxnet_horovod.act.rank_output import RankLogs
from sagemaker_mxnet_horovod.backends.parameter_server.placement import WORKER_RANK
from sagemaker_mxnet_horovod.core.plan import LocalProcess

TAIL_LINES = 20
# After a process exits, how long its output may still take to arrive (a child it started can hold its pipes).
OUTPUT_DRAIN_S = 2.0
EXIT_CODE_NOT_STARTED = 127  # as a shell reports a command it could not run


@dataclass(frozen=True)
class ProcessExit:
    """How one of the host's processes ended."""

    index: int  # its place in the plan's processes
    name: str  # "worker 1"
    role: str  # scheduler | server | worker
    returncode: int  # Popen's: negative for a signal
    tail: tuple[str, ...]  # its last stderr lines
    at: float  # time.monotonic()


def worker_rank(process: LocalProcess) -> int | None:
    return int(process.env[WORKER_RANK]) if process.role == "worker" and WORKER_RANK in process.env else None


class ProcessLogs(RankLogs):
    """<directory>/<host>-<process>.log for each of the host's processes, by its place in the plan: a worker's as
    an MPI rank's (<host>-rank-<R>.log), a server's and the scheduler's by name (algo-1-server-0.log)."""

    def __init__(self, directory: Path, host: str, processes: Sequence[LocalProcess]):
        super().__init__(directory, ())
        self.names = [f"{host}-rank-{rank}.log" if (rank := worker_rank(process)) is not None
                      else f"{host}-{process.name.replace(' ', '-')}.log" for process in processes]

    def path(self, index: int) -> Path:
        return self.directory / self.names[index]


class ProcessGroup:
    def __init__(self, processes: Sequence[LocalProcess], env: Mapping[str, str], cwd: str | None = None,
                 stderr_observers: Sequence[Callable[[int, str], None]] = (),
                 on_exit: Callable[[ProcessExit], None] = lambda ended: None,
                 logs: ProcessLogs | None = None, console_ranks: Collection[int] | None = None):
        self.processes, self.env, self.cwd, self.logs = tuple(processes), dict(env), cwd, logs
        # Not on the console: the workers whose rank is not among console_ranks (None: every process is shown).
        self.quiet = {index for index, process in enumerate(self.processes) if console_ranks is not None
                      and worker_rank(process) is not None and worker_rank(process) not in console_ranks}
        self.stderr_observers = tuple(stderr_observers)  # callable(index, line) for each stderr line
        self.on_exit = on_exit  # called with each exit as it happens, from the thread that saw it
        self.popens: dict[int, subprocess.Popen] = {}
        self.tails = {index: collections.deque(maxlen=TAIL_LINES) for index in range(len(self.processes))}
        self.ended: dict[int, ProcessExit] = {}
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)

    def start(self) -> None:
        """Start every process; one that cannot start is reported as an exit with the reason as its tail."""
        for index, process in enumerate(self.processes):
            try:
                popen = subprocess.Popen(process.argv, env={**self.env, **process.env}, cwd=self.cwd,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            except OSError as error:
                self._ended(index, EXIT_CODE_NOT_STARTED, [f"cannot start {process.argv[0]}: {error.strerror}"])
                continue
            self.popens[index] = popen
            pumps = [threading.Thread(target=self._pump, args=(index, popen.stdout, sys.stdout.buffer, False),
                                      daemon=True),
                     threading.Thread(target=self._pump, args=(index, popen.stderr, sys.stderr.buffer, True),
                                      daemon=True)]
            for pump in pumps:
                pump.start()
            threading.Thread(target=self._await_exit, args=(index, popen, pumps), daemon=True).start()

    def _pump(self, index: int, source, sink, is_stderr: bool) -> None:
        tag = f"[{self.processes[index].name}] ".encode()
        for line in iter(source.readline, b""):
            if index not in self.quiet:
                try:
                    sink.write(tag + line)
                    sink.flush()
                except (OSError, ValueError):
                    pass
            text = line.decode("utf-8", "replace").rstrip("\n")
            if self.logs:
                self.logs.write(index, text)
            if is_stderr:
                with self.lock:
                    self.tails[index].append(text)
                    for observer in self.stderr_observers:
                        observer(index, text)
        source.close()

    def _await_exit(self, index: int, popen: subprocess.Popen, pumps: list[threading.Thread]) -> None:
        returncode = popen.wait()
        deadline = time.monotonic() + OUTPUT_DRAIN_S
        for pump in pumps:
            pump.join(max(0.0, deadline - time.monotonic()))
        self._ended(index, returncode, ())

    def _ended(self, index: int, returncode: int, extra: Sequence[str]) -> None:
        process = self.processes[index]
        with self.lock:
            self.tails[index].extend(extra)
            ended = ProcessExit(index, process.name, process.role, returncode, tuple(self.tails[index]),
                                time.monotonic())
            self.ended[index] = ended
            self.changed.notify_all()
        self.on_exit(ended)

    # -----------------------------------------------------------------------------------------------------

    def running(self, roles: Collection[str] | None = None) -> list[int]:
        with self.lock:
            return [index for index, process in enumerate(self.processes)
                    if index not in self.ended and (roles is None or process.role in roles)]

    def send_signal(self, roles: Collection[str] | None, signum: int) -> None:
        """Signal the processes of these roles that still run (None: all of them), not their children."""
        for index in self.running(roles):
            popen = self.popens.get(index)
            if popen is not None:
                try:
                    popen.send_signal(signum)
                except ProcessLookupError:
                    pass

    def wait_ended(self, roles: Collection[str] | None, deadline: float) -> bool:
        """Whether every process of these roles has ended by the deadline."""
        with self.changed:
            while self.running_locked(roles):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.changed.wait(remaining)
        return True

    def running_locked(self, roles: Collection[str] | None) -> bool:
        return any(index not in self.ended and (roles is None or process.role in roles)
                   for index, process in enumerate(self.processes))

    def stop(self, roles: Collection[str] | None, grace_s: float, signum: int = signal.SIGTERM) -> bool:
        """Signal these roles' processes and wait for them; SIGKILL every session of theirs still there after the
        grace. Whether they all ended within it."""
        self.send_signal(roles, signum)
        if self.wait_ended(roles, time.monotonic() + grace_s):
            return True
        self.kill(roles)
        self.wait_ended(roles, time.monotonic() + OUTPUT_DRAIN_S + 1)
        return False

    def kill(self, roles: Collection[str] | None = None, sessions_of_ended: bool = False) -> None:
        """SIGKILL the sessions of these roles' running processes: the processes and whatever they started; with
        sessions_of_ended, also what processes that have ended left behind (the job's end: nothing may outlive it)."""
        indexes = set(self.running(roles))
        if sessions_of_ended:
            indexes |= set(self.popens)
        for index in sorted(indexes):
            popen = self.popens.get(index)
            if popen is not None:
                try:
                    os.killpg(popen.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

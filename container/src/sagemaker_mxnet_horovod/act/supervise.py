"""Supervise the job's command: run it, stream its output (cut into each rank's whole lines by the reader its backend
hands the run, diagnose/job_output.py; each rank's lines also to its own log, and to the console when it is shown
there: rank_output.py), keep each rank's last stderr lines, pass a stop on.

SageMaker stops a job with SIGTERM and sends SIGKILL 120 s later; the supervisor forwards SIGTERM to the
job and kills it outright if it has not finished within `stop_grace_s`, so the launcher always exits in time.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Mapping, Sequence

from sagemaker_mxnet_horovod.act.local_ranks import signal_local_ranks
from sagemaker_mxnet_horovod.act.rank_output import RankLogs, shown
from sagemaker_mxnet_horovod.core.exits import STOP_GRACE_S
from sagemaker_mxnet_horovod.core.log import log
from sagemaker_mxnet_horovod.core.outcome import JobResult
from sagemaker_mxnet_horovod.diagnose.job_output import PROGRAM, JobOutput, RankLine

TAIL_LINES = 20


class JobProcess:
    """output: how the command's output is read (diagnose/job_output.py): the program's own, or its backend's reader,
    which names each line's rank."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], output: JobOutput = PROGRAM,
                 stop_grace_s: float = STOP_GRACE_S, stderr_observers: Sequence = (), rank_logs: RankLogs | None = None,
                 console_ranks: Collection[int] | None = None, before_abort=None):
        self.argv, self.env, self.output, self.stop_grace_s = list(argv), dict(env), output, stop_grace_s
        self.tagged = output.tagged_by_rank
        # callable(rank, text) for every stderr line of a rank (rank 0: an untagged program's), under the lock
        self.stderr_observers = tuple(stderr_observers)
        self.rank_logs = rank_logs  # each rank's lines (an untagged program's: rank 0's)
        self.console_ranks = console_ranks if self.tagged else None  # None: every rank's output reaches the console
        self.before_abort = before_abort  # callable(reason) before the first abort ends the job (e.g. take stacks)
        self.rank_stderr: dict[int, collections.deque] = {}
        self.untagged = collections.deque(maxlen=TAIL_LINES * 3)
        self.process: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.stopped_by_signal: int | None = None
        self.killed_after_grace = False
        self.abort_reason: str | None = None
        self._timers: list[threading.Timer] = []

    def start(self) -> None:
        # A new session: signals to the launcher don't reach the job directly; we forward them once.
        self.process = subprocess.Popen(self.argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True)
        self._pumps = [
            threading.Thread(target=self._pump, args=(self.process.stdout, sys.stdout.buffer, False), daemon=True),
            threading.Thread(target=self._pump, args=(self.process.stderr, sys.stderr.buffer, True), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    def _pump(self, source, sink, is_stderr: bool) -> None:
        stream = "stderr" if is_stderr else "stdout"
        lines = self.output.lines(stream)
        for raw in iter(source.readline, b""):
            found = lines.feed(raw)
            self._show(sink, raw if self.console_ranks is None else
                       b"".join(line.console_bytes() for line in found if shown(line, self.console_ranks)))
            self._keep(found)
        unfinished = lines.flush()
        self._show(sink, b"".join(line.console_bytes() for line in unfinished
                                  if self.console_ranks is not None and shown(line, self.console_ranks)))
        self._keep(unfinished)
        source.close()

    @staticmethod
    def _show(sink, data: bytes) -> None:
        if not data:
            return
        try:
            sink.write(data)
            sink.flush()
        except (OSError, ValueError):
            pass

    def _keep(self, found: list[RankLine]) -> None:
        """A rank's lines into its log and, from stderr, its tail and the observers; the process's own into its tail
        (a program's own lines are rank 0's too)."""
        with self.lock:
            for line in found:
                rank = line.rank if self.tagged else 0
                if line.rank is None:
                    self.untagged.append(line.text)
                if rank is None:
                    continue
                if self.rank_logs:
                    self.rank_logs.write(rank, line.text)
                if line.stream == "stderr":
                    self.rank_stderr.setdefault(rank, collections.deque(maxlen=TAIL_LINES)).append(line.text)
                    self._observe(rank, line.text)

    def _observe(self, rank: int, text: str) -> None:
        for observer in self.stderr_observers:
            observer(rank, text)

    def stop(self, signum: int) -> None:
        """A stop of the launcher's (core/stop.py hands each signal once): said once, then passed on."""
        if self.stopped_by_signal is None:
            self.stopped_by_signal = signum
            log(f"received {signal.Signals(signum).name}; stopping the job (killing it if still running after "
                f"{self.stop_grace_s:g} s)")
        self.request_stop(signum)

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """Graceful stop (SageMaker stop, spot interruption): the ranks get the signal first, so they can
        checkpoint; Open MPI would SIGKILL them 1 s after forwarding it. mpirun follows after the grace."""
        if self.process is None or self.process.poll() is not None:
            return
        if self.tagged:
            signal_local_ranks(signum)
            self._arm(self.stop_grace_s, lambda: self._signal_job(signal.SIGTERM))
        else:
            self._signal_job(signum)
        self._arm(self.stop_grace_s + 10, self._kill)

    def abort(self, reason: str, grace_s: float = 10.0) -> None:
        """End the job now (a worker is gone): mpirun stops every rank; SIGKILL if that hangs."""
        if self.process is None or self.process.poll() is not None:
            return
        if not self.abort_reason:
            self.abort_reason = reason
            if self.before_abort:
                self.before_abort(reason)
        self._signal_job(signal.SIGTERM)
        self._arm(grace_s, self._kill)

    def abort_later(self, delay: float, reason) -> None:
        """abort(reason) in `delay` seconds unless the job has finished by then; reason: a string, or a
        callable giving it then."""
        self._arm(delay, lambda: self.abort(reason() if callable(reason) else reason))

    def _signal_job(self, signum: int) -> None:
        try:
            self.process.send_signal(signum)
        except ProcessLookupError:
            pass

    def _arm(self, delay: float, action) -> None:
        timer = threading.Timer(delay, action)
        timer.daemon = True
        timer.start()
        self._timers.append(timer)

    def _kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.killed_after_grace = True
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def wait(self) -> JobResult:
        assert self.process is not None
        returncode = self.process.wait()
        deadline = time.monotonic() + 5  # output of ranks killed with the job may still be in flight
        for pump in self._pumps:
            pump.join(max(0.0, deadline - time.monotonic()))
        for timer in self._timers:
            timer.cancel()
        if self.rank_logs:
            self.rank_logs.close()
        with self.lock:
            return JobResult(
                returncode=returncode,
                rank_stderr={rank: list(tail) for rank, tail in self.rank_stderr.items()},
                untagged_tail=list(self.untagged),
                stopped_by_signal=self.stopped_by_signal,
                killed_after_grace=self.killed_after_grace,
                abort_reason=self.abort_reason,
            )

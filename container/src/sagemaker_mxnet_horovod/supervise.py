"""Act: run the job's command, stream its output, keep each rank's last stderr lines, forward signals.

SageMaker stops a job with SIGTERM and sends SIGKILL 120 s later; the supervisor forwards SIGTERM to the
job and kills it outright if it has not finished within `stop_grace_s`, so the launcher always exits in time.
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

TAIL_LINES = 20
_TAG = re.compile(rb"^\[(\d+),(\d+)\]<(stdout|stderr)>:(.*)$", re.DOTALL)


@dataclass
class JobResult:
    returncode: int
    rank_stderr: dict = field(default_factory=dict)  # rank -> last stderr lines
    untagged_tail: list = field(default_factory=list)  # mpirun's own messages (or an untagged program's)
    stopped_by_signal: int | None = None  # SIGTERM/SIGINT we received and forwarded
    killed_after_grace: bool = False
    abort_reason: str | None = None  # set when the launcher itself ended the job (e.g. a lost worker)


class Job:
    def __init__(self, argv: Sequence[str], env: Mapping[str, str], tagged: bool, stop_grace_s: float = 100.0):
        self.argv, self.env, self.tagged, self.stop_grace_s = list(argv), dict(env), tagged, stop_grace_s
        self.rank_stderr: dict[int, collections.deque] = {}
        self.untagged = collections.deque(maxlen=TAIL_LINES * 3)
        self.process: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.stopped_by_signal: int | None = None
        self.killed_after_grace = False
        self.abort_reason: str | None = None
        self._kill_timer: threading.Timer | None = None

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
        for line in iter(source.readline, b""):
            try:
                sink.write(line)
                sink.flush()
            except (OSError, ValueError):
                pass
            match = _TAG.match(line) if self.tagged else None
            with self.lock:
                if match:
                    if match.group(3) == b"stderr":
                        rank = int(match.group(2))
                        tail = self.rank_stderr.setdefault(rank, collections.deque(maxlen=TAIL_LINES))
                        tail.append(match.group(4).decode("utf-8", "replace").rstrip("\n"))
                else:
                    text = line.decode("utf-8", "replace").rstrip("\n")
                    self.untagged.append(text)
                    if is_stderr and not self.tagged:
                        self.rank_stderr.setdefault(0, collections.deque(maxlen=TAIL_LINES)).append(text)
        source.close()

    def stop(self, signum: int = signal.SIGTERM, reason: str | None = None, grace_s: float | None = None) -> None:
        """Forward `signum` to the job; SIGKILL its whole process group if it outlives the grace period."""
        if self.process is None or self.process.poll() is not None:
            return
        if reason and not self.abort_reason:
            self.abort_reason = reason
        try:
            self.process.send_signal(signum)
        except ProcessLookupError:
            return
        if self._kill_timer is None:
            self._kill_timer = threading.Timer(self.stop_grace_s if grace_s is None else grace_s, self._kill)
            self._kill_timer.daemon = True
            self._kill_timer.start()

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
        if self._kill_timer:
            self._kill_timer.cancel()
        with self.lock:
            return JobResult(
                returncode=returncode,
                rank_stderr={rank: list(tail) for rank, tail in self.rank_stderr.items()},
                untagged_tail=list(self.untagged),
                stopped_by_signal=self.stopped_by_signal,
                killed_after_grace=self.killed_after_grace,
                abort_reason=self.abort_reason,
            )


def forward_stop_signals(job: Job) -> None:
    """SIGTERM/SIGINT to the launcher stop the job (SageMaker's StopTrainingJob, spot interruption)."""

    def handler(signum, _frame):
        if job.stopped_by_signal is None:
            job.stopped_by_signal = signum
            print(f"train: received {signal.Signals(signum).name}; stopping the job "
                  f"(killing it if still running after {job.stop_grace_s:g} s)", file=sys.stderr, flush=True)
        job.stop(signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)

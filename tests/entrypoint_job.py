"""One program process under test (tests/programs): its output collected by threads,
so a test can wait for a line, and a kill that reaches everything the process started.

A module of its own under tests/ (on sys.path through tests/conftest.py), named so no test dir shadows it.
"""

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


@functools.cache
def mpi_problem():
    """Why multi-rank entrypoint tests cannot run with this Python, or None."""
    if shutil.which("mpirun") is None:
        return "mpirun is not installed"
    probe = subprocess.run([sys.executable, "-c", "import horovod.mxnet as h; assert h.mpi_built()"],
                           check=False, capture_output=True, text=True)
    if probe.returncode != 0:
        last_line = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"horovod.mxnet (built with MPI) is not importable: {last_line}"
    return None


def session_pids(sid):
    """Every process in session `sid` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid:  # fields after the command: state, ppid, pgrp, session
            found.append(int(entry))
    return found


class Job:
    """An entrypoint process whose output is collected by threads (tests can wait for a line)."""

    def __init__(self, proc, workdir):
        self.proc, self.workdir, self.started = proc, Path(workdir), time.time()
        self._out, self._err = [], []
        self._readers = [threading.Thread(target=self._pump, args=(proc.stdout, self._out), daemon=True),
                         threading.Thread(target=self._pump, args=(proc.stderr, self._err), daemon=True)]
        for reader in self._readers:
            reader.start()
        self.returncode = self.seconds = None

    @staticmethod
    def _pump(stream, lines):
        for line in stream:
            lines.append(line)

    @property
    def stdout(self):
        return "".join(self._out)

    @property
    def stderr(self):
        return "".join(self._err)

    def wait_for(self, pattern, timeout):
        """Blocks until a stdout line matches `pattern` (regex); returns the match."""
        deadline = time.time() + timeout
        regex = re.compile(pattern)
        while time.time() < deadline:
            for line in list(self._out):
                found = regex.search(line)
                if found:
                    return found
            if self.proc.poll() is not None and not any(r.is_alive() for r in self._readers):
                break
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} within {timeout} s\n{self.explain()}")

    def wait(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            for reader in self._readers:
                reader.join(5)
            raise AssertionError(f"timed out after {timeout} s\n{self.explain()}") from None
        for reader in self._readers:
            reader.join(10)
        self.returncode = self.proc.returncode
        self.seconds = time.time() - self.started
        return self

    def kill(self):
        """SIGKILL the process; if it leads its own session (start_new_session=True), everything in that
        session too: mpirun puts each rank in its own process group, and DataLoader workers are the ranks'
        children."""
        if self.proc.poll() is not None:
            return
        try:
            own_session = os.getsid(self.proc.pid) == self.proc.pid
        except ProcessLookupError:
            own_session = False
        for pid in session_pids(self.proc.pid) if own_session else [self.proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    @property
    def model_dir(self):
        return self.workdir / "model"

    @property
    def checkpoint_dir(self):
        return self.workdir / "checkpoints"

    def explain(self):
        return f"exit {self.proc.poll()}\nstdout:\n{self.stdout[-5000:]}\nstderr:\n{self.stderr[-5000:]}"

"""The progress watch inside each rank (mpi_progress_timeout_s): a rank with no output and no Horovod
collective for the timeout ends itself, saying where it was blocked and what it last printed; mpirun then
ends the job (orte_abort_on_non_zero_status) and the launcher puts that line first in the failure file.

Progress is a line written to sys.stdout/sys.stderr, a Horovod operation submitted (the lookup of a
`horovod_mxnet_*` function on horovod.mxnet.mpi_ops' library handle, which every collective goes through),
or the main thread computing (its CPU time growing: importing MXNet alone took over 6 s on a loaded host,
silently). A rank blocked in MXNet waiting for a result (a collective's or a computation's) counts as alive:
when others never submit that collective, it is a stall, which Horovod's stall inspector ends
(horovod_stall_timeout_s), naming the ranks that never submitted it. What is left is a main thread blocked
elsewhere: on I/O, a lock, a queue, a peer outside Horovod. Stdlib only; started by act/rank_program.py.

A parameter-server worker has no stall inspector: its pushes and pulls are the engine's, and a server that never
answers leaves its main thread waiting on the engine (asnumpy, wait_to_read) forever, every thread idle (measured:
a SIGSTOPped server kept both workers of a 2-host job waiting so past 100 s). There, waiting on the engine counts
as alive only while the process computes (its CPU time, every thread's, grows): engine_waits_need_cpu.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import FrameType

MARKER = "train: no progress:"
EXIT_CODE = 124  # as GNU timeout's
# Where a blocked main thread waits for MXNet's engine: a computation's or a collective's result.
_MXNET_WAITS = frozenset({"asnumpy", "asscalar", "wait_to_read", "wait_to_write", "waitall", "item"})
_LIBRARY_PARTS = (f"{os.sep}lib{os.sep}python", f"{os.sep}sagemaker_mxnet_horovod{os.sep}")


class ProgressWatch:
    """Pure bookkeeping: the last moment of progress and the last output line, fed by the hooks below."""

    def __init__(self, timeout_s: float, rank: int, host: str, now: float):
        self.timeout_s, self.rank, self.host = timeout_s, rank, host
        self.last_progress = now
        self.last_line = ""
        self.last_line_at: float | None = None
        self.last_collective: str | None = None
        self._partial = ""

    def saw_output(self, text: str, now: float) -> None:
        self.last_progress = now
        lines = (self._partial + text).split("\n")
        self._partial = lines[-1][-400:]
        for line in (*lines[:-1], self._partial):
            if line.strip():
                self.last_line, self.last_line_at = line.strip()[:300], now

    def saw_collective(self, name: str, now: float) -> None:
        self.last_progress, self.last_collective = now, name

    def expired(self, now: float, busy: bool) -> bool:
        """busy: the main thread computed, or waits on MXNet's engine (if that wait never ends, the stall
        timeout says why), since the last check."""
        if busy:
            self.last_progress = now
        return now - self.last_progress > self.timeout_s

    def message(self, now: float, where: str) -> str:
        seen = (f"last output {now - self.last_line_at:.0f} s ago: {self.last_line!r}" if self.last_line_at
                else "no output yet")
        collective = f"; last Horovod call: {self.last_collective}" if self.last_collective else ""
        return (f"{MARKER} rank {self.rank} on {self.host} wrote no output, started no collective and did not "
                f"compute for {self.timeout_s:g} s (mpi_progress_timeout_s); {where}; {seen}{collective}")


# The main thread computes when its CPU time grows by more than this share of the time between checks (a
# thread polling for a file every 50 ms uses well under 1 %).
COMPUTING_CPU_SHARE = 0.02
# A parameter-server worker's engine computes when the process's CPU time grows by more than this share of the time
# between checks: MXNet's CPU operators keep a core busy; a worker whose server never answered stayed below it (its
# watch fired in the fault suite's stopped-server rows). Not measured: a GPU worker waiting on a long kernel.
ENGINE_CPU_SHARE = 0.1


def thread_cpu_seconds(native_id: int) -> float:
    """User + system CPU time of one thread of this process, from /proc."""
    try:
        with open(f"/proc/self/task/{native_id}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15


def process_cpu_seconds() -> float:
    """User + system CPU time of every thread of this process."""
    times = os.times()
    return times.user + times.system


def is_library(filename: str) -> bool:
    return any(part in filename for part in _LIBRARY_PARTS)


def waiting_on_engine(frame: FrameType | None) -> bool:
    """The blocked thread's innermost Python frame is MXNet waiting for a result, or inside Horovod."""
    if frame is None:
        return False
    filename = frame.f_code.co_filename
    return (f"{os.sep}horovod{os.sep}" in filename
            or (f"{os.sep}mxnet{os.sep}" in filename and frame.f_code.co_name in _MXNET_WAITS))


def describe_frame(frame: FrameType | None) -> str:
    """Where the thread is blocked: its innermost frame and, when that is library code, the caller in the
    program's own code."""
    if frame is None:
        return "main thread gone"

    def at(f: FrameType) -> str:
        return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno} ({f.f_code.co_name})"

    where = f"blocked in {at(frame)}"
    if is_library(frame.f_code.co_filename):
        caller = frame.f_back
        while caller is not None and is_library(caller.f_code.co_filename):
            caller = caller.f_back
        if caller is not None:
            where += f" called from {at(caller)}"
    return where


class _WatchedStream:
    """sys.stdout/sys.stderr, noting each write as progress."""

    def __init__(self, stream, watch: ProgressWatch, lock: threading.Lock):
        self._stream, self._watch, self._lock = stream, watch, lock

    def write(self, text):
        with self._lock:
            self._watch.saw_output(str(text), time.monotonic())
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _WatchedLibrary:
    """horovod.mxnet.mpi_ops' ctypes library: each horovod_mxnet_* lookup is the start of an operation."""

    def __init__(self, library, watch: ProgressWatch, lock: threading.Lock):
        self._library, self._watch, self._lock = library, watch, lock

    def __getattr__(self, name):
        if name.startswith("horovod_mxnet_"):
            with self._lock:
                self._watch.saw_collective(name.removeprefix("horovod_mxnet_").removesuffix("_async"),
                                           time.monotonic())
        return getattr(self._library, name)


def _hook_horovod(watch: ProgressWatch, lock: threading.Lock) -> bool:
    ops = sys.modules.get("horovod.mxnet.mpi_ops")
    library = getattr(ops, "MPI_MXNET_LIB_CTYPES", None)
    if library is None:
        return False
    if not isinstance(library, _WatchedLibrary):
        ops.MPI_MXNET_LIB_CTYPES = _WatchedLibrary(library, watch, lock)
    return True


def start(timeout_s: float, rank: int, host: str, before_exit=None, engine_waits_need_cpu: bool = False) -> ProgressWatch:
    """Watch this process: hook its output streams now, Horovod's library once the program imports it.
    before_exit: called before the watch ends the rank (the launcher takes every rank's stacks then);
    engine_waits_need_cpu: a parameter-server worker's (see the module's docstring)."""
    lock = threading.Lock()
    watch = ProgressWatch(timeout_s, rank, host, time.monotonic())
    real_stderr = sys.stderr
    sys.stdout = _WatchedStream(sys.stdout, watch, lock)
    sys.stderr = _WatchedStream(sys.stderr, watch, lock)
    main = threading.main_thread()
    interval = min(5.0, max(0.2, timeout_s / 10))

    def run() -> None:
        hooked = False
        cpu, process_cpu = thread_cpu_seconds(main.native_id), process_cpu_seconds()
        while True:
            time.sleep(interval)  # polling: a blocked main thread sends no notification
            hooked = hooked or _hook_horovod(watch, lock)
            frame = sys._current_frames().get(main.ident)
            now, cpu_before, cpu = time.monotonic(), cpu, thread_cpu_seconds(main.native_id)
            process_before, process_cpu = process_cpu, process_cpu_seconds()
            engine_busy = waiting_on_engine(frame) and (
                not engine_waits_need_cpu or process_cpu - process_before > ENGINE_CPU_SHARE * interval)
            busy = cpu - cpu_before > COMPUTING_CPU_SHARE * interval or engine_busy
            with lock:
                if not watch.expired(now, busy):
                    continue
                message = watch.message(now, describe_frame(frame))
            if before_exit:
                before_exit()
            # Last on this rank's stderr, so the launcher finds it; then end the rank, and mpirun the job.
            real_stderr.write(message + "\n")
            real_stderr.flush()
            os._exit(EXIT_CODE)

    threading.Thread(target=run, name="progress-watch", daemon=True).start()
    return watch

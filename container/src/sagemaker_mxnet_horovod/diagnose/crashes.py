"""Native crashes: the fatal signal a rank's crash report names and the innermost frame of code outside the
C/C++ runtimes and the interpreter, for the failure file's first line. Pure, unit-tested on captured text.

Two handlers write crash reports to a rank's stderr:
- MXNet's SIGSEGV handler: "Segmentation fault: 11" (in some MXNet builds followed by "Stack trace:" and
  "[bt] (N) lib(symbol+0x..) [0x..]" frames), then exit(-1): mpirun reports exit code 255, or SIGABRT when
  that exit fails (on a crashed engine thread, MXNet's engine destructor aborts).
- Open MPI's, for the signals nobody else handles: "*** Process received signal ***", "Signal: Aborted (6)",
  "[ N] lib(symbol+0x..)[0x..]" frames, "*** End of error message ***", each line after a "[host:pid] "
  prefix. A report of a signal raised inside another signal's handler holds the first signal's frames too:
  below the recurrence of its frame [0], the signal trampoline.
Each line comes whole, as the job's output reader cut it (job_output.py): a line Open MPI wrote in pieces is
one line again. A report is longer than the stderr tail the launcher keeps, so CrashLog reads each line as it
arrives (a supervise.JobProcess stderr observer).
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
from dataclasses import dataclass, field

_OMPI_PREFIX = re.compile(r"^\[[\w.-]+:\d+\]\s*")
_OMPI_START = "*** Process received signal ***"
_OMPI_END = "*** End of error message ***"
_OMPI_SIGNAL = re.compile(r"^Signal: .* \((\d+)\)$")
_MXNET_SIGNAL = re.compile(r"^Segmentation fault: (\d+)$")
# "[ 3] /lib/x.so(sym+0x12)[0x7f..]" (Open MPI), "[bt] (3) /lib/x.so(sym+0x12) [0x7f..]" (MXNet, dmlc)
_FRAME = re.compile(r"^(?:\[\s*\d+\]|\[bt\] \(\d+\))\s+(?P<library>[^\s(\[]+)(?:\((?P<where>.*)\))?\s*\[0x[0-9a-f]+\]$")
_OFFSET = re.compile(r"\+(?:0x)?[0-9a-f]+$")
# C and C++ runtimes and the interpreter: their frames say how the crash was reached, not where.
_RUNTIME = re.compile(r"^(?:(?:libc|libstdc\+\+|libgcc_s|libpthread|libm|libdl|ld-linux[\w-]*)[.-]"
                      r"|(?:lib)?python[\d.]*(?:$|[.-]))")
# The reporters' own frames in MXNet's stack.
_REPORTER = ("StackTrace", "SegfaultLogger")
MAX_REPORTS = 4  # per rank: the first ones hold the cause
MAX_FRAMES = 128


@dataclass(frozen=True)
class Frame:
    library: str  # as printed: a path, or the executable's name
    where: str | None  # "symbol+0x12", "+0x12", or None

    @property
    def symbol(self) -> str | None:
        return _OFFSET.sub("", self.where or "") or None


@dataclass(frozen=True)
class NativeCrash:
    signal_number: int
    frame: Frame | None = None  # the innermost with a symbol outside the runtimes

    @property
    def signal_name(self) -> str:
        try:
            return signal.Signals(self.signal_number).name
        except ValueError:
            return f"signal {self.signal_number}"

    def describe(self) -> str:
        """'SIGSEGV (segmentation fault) in horovod::common::EnqueueTensorBroadcast (mpi_lib....so)'"""
        text = self.signal_name
        meaning = signal.strsignal(self.signal_number) if self.signal_name.startswith("SIG") else None
        if meaning and not meaning.startswith(("Unknown", "Real-time")):
            text += f" ({meaning[0].lower() + meaning[1:]})"
        if self.frame:
            text += f" in {readable(self.frame.symbol)} ({os.path.basename(self.frame.library)})"
        return text


@dataclass
class _Report:
    signal_number: int | None
    frames: list = field(default_factory=list)
    closed: bool = False


class CrashLog:
    """Each rank's crash reports, read from its stderr line by line (a supervise.JobProcess stderr observer)."""

    def __init__(self, on_first_report=None):
        self.reports: dict[int, list[_Report]] = {}
        self.on_first_report = on_first_report  # callable(rank), when a rank's first crash report begins

    def observe(self, rank: int, text: str) -> None:
        line = _OMPI_PREFIX.sub("", text.strip())
        reports = self.reports.setdefault(rank, [])
        current = reports[-1] if reports and not reports[-1].closed else None
        ompi_signal = _OMPI_SIGNAL.match(line)
        mxnet_signal = _MXNET_SIGNAL.match(line)
        if line == _OMPI_START:
            self._start(rank, reports, current, None)
        elif ompi_signal and current and current.signal_number is None and not current.frames:
            current.signal_number = int(ompi_signal.group(1))
        elif ompi_signal or mxnet_signal:
            self._start(rank, reports, current, int((ompi_signal or mxnet_signal).group(1)))
        elif line == _OMPI_END and current:
            current.closed = True
        elif current and len(current.frames) < MAX_FRAMES:
            frame = _FRAME.match(line)
            if frame:
                current.frames.append(Frame(frame.group("library"), frame.group("where")))

    def _start(self, rank: int, reports: list[_Report], current: _Report | None, signal_number: int | None) -> None:
        if current:
            current.closed = True
        if len(reports) < MAX_REPORTS:
            reports.append(_Report(signal_number))
            if len(reports) == 1 and self.on_first_report:
                self.on_first_report(rank)

    def crash(self, rank: int) -> NativeCrash | None:
        """The rank's first fatal signal and, from its first stack, where it struck; None without a report."""
        reports = self.reports.get(rank, ())
        first = next((r.signal_number for r in reports if r.signal_number is not None), None)
        if first is None:
            return None
        stack = next((r.frames for r in reports if r.frames), [])
        return NativeCrash(first, innermost_named_frame(stack))

    def crashes(self) -> dict[int, NativeCrash]:
        return {rank: crash for rank in sorted(self.reports) if (crash := self.crash(rank))}


def innermost_named_frame(frames: list[Frame]) -> Frame | None:
    # A signal raised in another's handler: the first signal's frames are those below the trampoline's
    # recurrence (the report's frame [0]).
    if frames:
        recurs = [i for i, frame in enumerate(frames) if i and frame == frames[0]]
        if recurs:
            frames = frames[recurs[-1] + 1:]
    for frame in frames:
        symbol = frame.symbol
        if symbol and not _RUNTIME.match(os.path.basename(frame.library)) \
                and not any(name in symbol for name in _REPORTER):
            return frame
    return None


def readable(symbol: str) -> str:
    """A frame's function, qualified, without return type, parameters or template arguments (<...>)."""
    name: list[str] = []
    depth = 0
    for char in demangle(symbol):
        if char == "<":
            if depth == 0:
                name.append("<...>")
            depth += 1
        elif char == ">":
            depth -= 1
        elif depth == 0 and char == "(":
            break
        elif depth == 0 and char == " ":
            name.clear()  # what came before was the return type
        elif depth == 0:
            name.append(char)
    return "".join(name) or symbol


def demangle(symbol: str) -> str:
    """A C++ symbol as libstdc++'s own demangler spells it (as c++filt does); anything else unchanged.
    Loaded only here, when a crash is reported: every image and host with MXNet has libstdc++."""
    if not symbol.startswith("_Z"):
        return symbol
    try:
        cxa_demangle = ctypes.CDLL("libstdc++.so.6").__cxa_demangle
        free = ctypes.CDLL(None).free
    except (OSError, AttributeError):
        return symbol
    cxa_demangle.restype = ctypes.c_void_p
    cxa_demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    free.argtypes = [ctypes.c_void_p]
    status = ctypes.c_int()
    buffer = cxa_demangle(symbol.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not buffer:
        return symbol
    try:
        return ctypes.string_at(buffer).decode(errors="replace")
    finally:
        free(buffer)

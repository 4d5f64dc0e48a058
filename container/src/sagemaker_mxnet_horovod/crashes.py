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
mpirun --tag-output tags each piece Open MPI writes, so tags also appear mid-line. A report is longer than
the stderr tail the launcher keeps, so CrashLog reads each line as it arrives (a supervise.Job stderr
observer).
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass, field

_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
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
    """Each rank's crash reports, read from its stderr line by line (a supervise.Job stderr observer)."""

    def __init__(self):
        self.reports: dict[int, list[_Report]] = {}

    def observe(self, rank: int, text: str) -> None:
        line = _OMPI_PREFIX.sub("", untag(text).strip())
        reports = self.reports.setdefault(rank, [])
        current = reports[-1] if reports and not reports[-1].closed else None
        ompi_signal = _OMPI_SIGNAL.match(line)
        mxnet_signal = _MXNET_SIGNAL.match(line)
        if line == _OMPI_START:
            self._start(reports, current, None)
        elif ompi_signal and current and current.signal_number is None and not current.frames:
            current.signal_number = int(ompi_signal.group(1))
        elif ompi_signal or mxnet_signal:
            self._start(reports, current, int((ompi_signal or mxnet_signal).group(1)))
        elif line == _OMPI_END and current:
            current.closed = True
        elif current and len(current.frames) < MAX_FRAMES:
            frame = _FRAME.match(line)
            if frame:
                current.frames.append(Frame(frame.group("library"), frame.group("where")))

    @staticmethod
    def _start(reports: list[_Report], current: _Report | None, signal_number: int | None) -> None:
        if current:
            current.closed = True
        if len(reports) < MAX_REPORTS:
            reports.append(_Report(signal_number))

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


def untag(line: str) -> str:
    """Without mpirun's [job,rank]<stream>: tags, wherever they are in the line."""
    return _TAG.sub("", line)


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
    if symbol.startswith("_Z"):
        return demangle(symbol)
    # Already demangled (MXNet's [bt] frames): "void mxnet::CopyImpl<mshadow::cpu>(mxnet::NDArray const&)+0x4"
    name: list[str] = []
    depth = 0
    for char in symbol:
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


_SOURCE_NAME = re.compile(r"\d+")
_CTOR_DTOR = re.compile(r"[CD][0-5]")
_ABI_TAG = re.compile(r"B(\d+)")


def demangle(symbol: str) -> str:
    """An Itanium C++ name's qualified name, without its parameters: _ZN7horovod6common22EnqueueTensorBroadcastE...
    -> horovod::common::EnqueueTensorBroadcast; template arguments show as <...>. Anything else unchanged."""
    if symbol.startswith("_Z") and (source := _SOURCE_NAME.match(symbol, 2)):
        length = int(source.group())
        name = symbol[source.end(): source.end() + length]
        return name if len(name) == length else symbol
    if not symbol.startswith("_ZN"):
        return symbol
    position = 3
    while position < len(symbol) and symbol[position] in "rVKRO":  # a method's qualifiers
        position += 1
    parts: list[str] = []
    if symbol.startswith("St", position):
        parts.append("std")
        position += 2
    while position < len(symbol) and symbol[position] != "E":
        source = _SOURCE_NAME.match(symbol, position)
        ctor_dtor = _CTOR_DTOR.match(symbol, position)
        abi_tag = _ABI_TAG.match(symbol, position)
        if source:
            length = int(source.group())
            parts.append(symbol[source.end(): source.end() + length])
            position = source.end() + length
        elif ctor_dtor and parts:
            parts.append(("~" if symbol[position] == "D" else "") + parts[-1].partition("<")[0])
            position += 2
        elif abi_tag:  # B5cxx11
            position = abi_tag.end() + int(abi_tag.group(1))
        elif symbol[position] == "I" and parts:
            end = _skip_template_args(symbol, position)
            if end is None:
                return symbol
            parts[-1] += "<...>"
            position = end
        else:
            return symbol  # substitutions and the rest of the grammar: not worth a demangler here
    if position >= len(symbol) or not parts:
        return symbol
    return "::".join(parts)


def _skip_template_args(symbol: str, position: int) -> int | None:
    """The position after the template arguments I...E starting at `position`, None if unsure."""
    depth = 0
    while position < len(symbol):
        char = symbol[position]
        source = _SOURCE_NAME.match(symbol, position)
        if source:
            position = source.end() + int(source.group())
            continue
        if char in "IN":
            depth += 1
        elif char == "E":
            depth -= 1
            if depth == 0:
                return position + 1
        elif char == "L":  # a literal: L<type><value>E
            end = symbol.find("E", position)
            if end < 0:
                return None
            position = end
        elif char in "ST":  # substitutions and template parameters: S_, S0_, St, Sa, T_, T1_
            if char == "S" and position + 1 < len(symbol) and symbol[position + 1].islower():
                position += 1
            else:
                end = symbol.find("_", position)
                if end < 0:
                    return None
                position = end
        elif char == "D":  # two-letter builtin types (Dn, Di, ...)
            position += 1
        position += 1
    return None

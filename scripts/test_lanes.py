"""Run make test's lanes at once, then its last phase, and say how each went (docs/testing.md, "The time budget").

Each lane is a shell command, here a make of some targets. The lanes start together; each one's output (stdout and
stderr) goes whole to LOG_DIR/NAME.log and to this console line by line, each line led by `[NAME] `, so that a CI log
shows both lanes' progress as it happens (a line still unfinished after a minute, pytest's dots, is shown so far and
carried on after `[NAME] ... `). Once every lane has ended, each lane's pytest summaries follow: the --durations list,
the failures, the counts, and make's errors. Then each --then command runs, alone, the same way. Last, every failed
test and make error of every lane again, a line each, then each lane's status: the end of a CI log names them all.
The exit status is 0 only when every lane and every --then command exited 0. Past the deadline (--deadline-h),
whatever still runs is ended (SIGTERM to its process group, SIGKILL 30 s later), named, and counts as failed.

usage: python3 scripts/test_lanes.py --log-dir DIR [--deadline-h H] --lane NAME=COMMAND ... [--then NAME=COMMAND ...]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

UNFINISHED_LINE_S = 60.0  # a partial line (pytest's dots for a slow module) shown after this long
KILL_AFTER_S = 30.0  # from SIGTERM to SIGKILL, for a lane ended at the deadline
READER_GRACE_S = 10.0  # for the rest of its output, once its command exited
HEADER = re.compile(r"^=+ (.*) =+$")
COUNTS = re.compile(r"\b(passed|failed|errors?|skipped|deselected|xfailed|xpassed|no tests ran)\b.* in [\d.]+s")
MAKE_ERROR = re.compile(r"^make(\[\d+\])?: \*\*\* ")
FAILED_TEST = re.compile(r"^(FAILED|ERROR) ")  # pytest's short test summary: a failed test, or a test's error
FAILED_TEST_CHARS = 300  # of each of those lines in the last recap

console_lock = threading.Lock()


def say(text: str) -> None:
    with console_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def clock() -> str:
    return time.strftime("%H:%M:%S")


class Lane:
    """One command: its process (its own process group), its log, and its output shown with its name."""

    def __init__(self, name: str, command: str, log_dir: Path, unfinished_line_s: float = UNFINISHED_LINE_S):
        self.name, self.command, self.log_path = name, command, log_dir / f"{name}.log"
        self.unfinished_line_s = unfinished_line_s
        self.proc: subprocess.Popen | None = None
        self.status: int | None = None
        self.started = self.ended = 0.0
        self._pending, self._pending_since, self._continued = b"", 0.0, False
        self._lock = threading.Lock()

    def start(self, ended: threading.Event) -> None:
        """Start it; `ended` is set once its output has ended and it exited."""
        say(f"[{self.name}] started at {clock()}: {self.command}")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(["bash", "-c", self.command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.reader = threading.Thread(target=self._read, args=(ended,), daemon=True)
        self.reader.start()

    def _read(self, ended: threading.Event) -> None:
        try:
            self._copy_output()
            self.proc.wait()
        finally:
            ended.set()

    def _copy_output(self) -> None:
        with open(self.log_path, "wb") as log:
            while chunk := os.read(self.proc.stdout.fileno(), 65536):
                log.write(chunk)
                log.flush()
                with self._lock:
                    *lines, self._pending = (self._pending + chunk).split(b"\n")
                    for line in lines:
                        self._show(line, finished=True)
                    if lines or not self._pending:
                        self._pending_since = 0.0
                    if self._pending and not self._pending_since:
                        self._pending_since = time.monotonic()
        with self._lock:
            if self._pending:
                self._show(self._pending, finished=True)
            self._pending = b""

    def _show(self, line: bytes, finished: bool) -> None:
        lead = f"[{self.name}] " + ("... " if self._continued else "")
        say(lead + line.decode(errors="replace").rstrip("\r"))
        self._continued = not finished

    def show_unfinished_line(self, now: float) -> None:
        with self._lock:
            if self._pending and now - self._pending_since >= self.unfinished_line_s:
                self._show(self._pending, finished=False)
                self._pending, self._pending_since = b"", 0.0

    def poll(self) -> bool:
        """Whether it has ended (its output read to the end)."""
        if self.status is None and self.proc.poll() is not None:
            self.reader.join(READER_GRACE_S)
            if self.reader.is_alive():  # a process it left behind holds its output open
                say(f"[{self.name}] its output still open {READER_GRACE_S:g} s after it exited: its log may end early")
            self.status, self.ended = self.proc.returncode, time.monotonic()
            say(f"[{self.name}] ended at {clock()} after {self.took()}: "
                + ("passed" if self.status == 0 else f"FAILED (exit {self.status})"))
        return self.status is not None

    def end(self) -> None:
        """SIGTERM to the process group, SIGKILL to it if it still runs KILL_AFTER_S later."""
        for signum, wait_s in ((signal.SIGTERM, KILL_AFTER_S), (signal.SIGKILL, KILL_AFTER_S)):
            try:
                os.killpg(self.proc.pid, signum)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self.poll()

    def took(self) -> str:
        seconds = int((self.ended or time.monotonic()) - self.started) if self.started else 0
        return f"{seconds // 60} min {seconds % 60} s"


def run_together(lanes: list[Lane], deadline: float) -> None:
    """Start the lanes and wait for all of them, until the deadline (time.monotonic()); then end those left."""
    ended = threading.Event()
    for lane in lanes:
        lane.start(ended)
    while not all(lane.poll() for lane in lanes):
        now = time.monotonic()
        if now > deadline:
            for lane in lanes:
                if lane.status is None:
                    say(f"[{lane.name}] still running at the deadline (--deadline-h): ending it")
                    lane.end()
                    lane.status = lane.status or 1
            return
        for lane in lanes:
            lane.show_unfinished_line(now)
        ended.wait(1)  # a lane's end, or a second for the clock: the deadline, the unfinished lines
        ended.clear()


def summary(log: str) -> list[str]:
    """What a lane's log says in the end: each pytest run's --durations list and short summary (its sections) and
    its counts line, and make's error lines."""
    lines, shown, section = log.splitlines(), [], False
    for line in lines:
        header = HEADER.match(line)
        if header:
            title = header.group(1)
            section = "durations" in title or title == "short test summary info"
            if section or COUNTS.search(title):
                shown.append(line)
            continue
        if (section and line.strip()) or MAKE_ERROR.match(line):
            shown.append(line)
    return shown


def failures(log: str) -> list[str]:
    """Of a lane's summary: the failed tests (and errors) of its pytest runs' short test summaries, and make's errors
    (a failed target that is no pytest run: a structure test, the image size). A test's own captured output that
    starts with FAILED (a pytest it ran) is not in a short test summary, so not here."""
    return [line[:FAILED_TEST_CHARS] for line in summary(log) if FAILED_TEST.match(line) or MAKE_ERROR.match(line)]


def read_log(lane: Lane) -> str:
    return lane.log_path.read_text(errors="replace") if lane.log_path.exists() else ""


def report(lanes: list[Lane]) -> None:
    for lane in lanes:
        say(f"===== {lane.name}: {'passed' if lane.status == 0 else f'FAILED (exit {lane.status})'} in "
            f"{lane.took()}; its log: {lane.log_path}")
        for line in summary(read_log(lane)):
            say(f"[{lane.name}] {line}")


def parse_lane(text: str) -> tuple[str, str]:
    name, sep, command = text.partition("=")
    if not sep or not re.fullmatch(r"[\w.-]+", name) or not command.strip():
        raise argparse.ArgumentTypeError(f"not NAME=COMMAND: {text!r}")
    return name, command


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--deadline-h", type=float, default=3.0, help="for the lanes and the --then commands in all")
    parser.add_argument("--lane", type=parse_lane, action="append", required=True, help="NAME=COMMAND, run at once")
    parser.add_argument("--then", type=parse_lane, action="append", default=[], help="NAME=COMMAND, after the lanes")
    parser.add_argument("--unfinished-line-s", type=float, default=UNFINISHED_LINE_S, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = [name for name, _ in args.lane + args.then]
    if len(set(names)) != len(names):
        parser.error(f"a name used twice: {names}")
    args.log_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.deadline_h * 3600
    lanes = [Lane(name, command, args.log_dir, args.unfinished_line_s) for name, command in args.lane]
    everything = list(lanes)

    def stop(signum, _frame):  # CI cancelled: end the lanes' process groups too
        for lane in everything:
            if lane.proc is not None and lane.status is None:
                lane.end()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    say(f"lanes: {', '.join(lane.name for lane in lanes)} at once, logged in {args.log_dir}/"
        + (f"; then {', '.join(name for name, _ in args.then)}" if args.then else ""))
    run_together(lanes, deadline)
    report(lanes)
    for name, command in args.then:
        lane = Lane(name, command, args.log_dir, args.unfinished_line_s)
        everything.append(lane)
        if time.monotonic() > deadline:
            say(f"[{name}] not started: past the deadline (--deadline-h)")
            lane.status = 1
            continue
        run_together([lane], deadline)
        report([lane])
    failed = [lane.name for lane in everything if lane.status != 0]
    for lane in everything:
        for line in failures(read_log(lane)):
            say(f"[{lane.name}] {line}")
    say("lanes: " + ", ".join(f"{lane.name} {'passed' if lane.status == 0 else 'FAILED'} ({lane.took()})"
                              for lane in everything))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

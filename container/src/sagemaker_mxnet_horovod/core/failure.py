"""Failure reports: what SageMaker shows users (the first 1024 characters of /opt/ml/output/failure).

A Failure is a record built once, where the failure is understood (backends/mpi/mpirun_report.py for mpirun's
ranks, diagnose/process_failure.py for another process, diagnose/verdict.py for the whole job, core/stop.py for a
stop, cli.py for a job that never started), and rendered once: the cause first (which host or rank, exit code or
signal, the error line or the native crash), a finding of the launcher's own before it when it has one, then the
detail (the last lines of whoever failed).

A failure file the user's own program wrote during the job is kept: its text comes first, then the launcher's
diagnosis (the toolkit keeps the user's file and drops its own message; we keep both): compose_failure.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sagemaker_mxnet_horovod.core.exits import EXIT_FAILED

FAILURE_LIMIT = 1024


@dataclass(frozen=True)
class Failure:
    """Why the job failed, as data."""

    cause: str  # the first line: what failed, where, how it ended, its error
    exit_code: int = EXIT_FAILED  # what `train` exits with
    host: str | None = None  # the host to blame, when there is one
    rank: int | None = None  # the rank to blame, when there is one
    signal_number: int | None = None  # the signal that ended it, when one did
    tail_title: str = ""  # whose last lines follow the cause ("rank 1 stderr", "mpirun")
    tail: tuple[str, ...] = ()
    finding: str | None = None  # the launcher's own finding (a hang watch, a lost worker): shown first

    def with_finding(self, finding: str | None) -> Failure:
        return replace(self, finding=finding) if finding else self

    def render(self) -> str:
        text = self.cause + tail_block(self.tail_title, self.tail)
        # The launcher's own finding is the cause; what mpirun said about it follows.
        return f"{self.finding}\n{text}" if self.finding else text


def tail_block(title: str, lines: Sequence[str]) -> str:
    # The lines are whole, as the job's output reader cut them (diagnose/job_output.py): nothing of its marking left.
    lines = [line for line in lines if line.strip()]
    if not lines:
        return ""
    return f"\n--- last lines of {title} ---\n" + "\n".join(lines)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_exit(returncode: int) -> str:
    """Popen returncode: negative means killed by a signal."""
    if returncode < 0:
        return f"was killed by {signal_name(-returncode)}"
    if returncode > 128 and returncode - 128 in signal.Signals._value2member_map_:
        return f"exited with code {returncode} ({signal_name(returncode - 128)})"
    return f"exited with code {returncode}"


def exit_status(returncode: int) -> int:
    """A Popen returncode as a process's exit status: killed by signal N is 128 + N, as a shell reports it."""
    return returncode if returncode >= 0 else 128 - returncode


def error_line(lines: Sequence[str]) -> str | None:
    """The line that names the error: the last non-blank stderr line, usually the exception."""
    for line in reversed(lines):
        if line.strip():
            return line.strip()
    return None


def rank_host(rank_hosts: Sequence[str], rank: int, unknown: str = "?") -> str:
    """The plan's name of the host a rank runs on (`unknown` for a rank beyond the plan)."""
    return rank_hosts[rank] if rank < len(rank_hosts) else unknown


def shorten(line: str | None, limit: int = 80) -> str:
    text = line or ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fit(message: str, limit: int = FAILURE_LIMIT) -> str:
    """At most `limit` characters, keeping the cause (first line) and the newest detail (the tail)."""
    if len(message) <= limit:
        return message
    first, _, rest = message.partition("\n")
    if len(first) >= limit - 20:
        return first[: limit - 3] + "..."
    room = limit - len(first) - len("\n...\n")
    return f"{first}\n...\n{rest[-room:]}"


# The launcher's part of a failure file that also holds the user's text starts with this, so a reader can
# tell the two apart.
LAUNCHER_PREFIX = "train: "
# The launcher's first line keeps at least this much room after the user's text (longer ones are cut).
LAUNCHER_HEAD_ROOM = 300
USER_TEXT_CUT = " [...]"


def compose_failure(diagnosis: str, user_texts: Sequence[tuple[str | None, str | None]],
                    limit: int = FAILURE_LIMIT) -> str:
    """The users' failure texts first, then the launcher's diagnosis, within `limit` characters.

    user_texts: (host, text) pairs; host None is this host (unlabelled), others are labelled "[host] ".
    Empty texts are skipped; with none left the diagnosis is returned unchanged. The user's part is cut
    (its beginning kept, where people put the cause) so that the diagnosis's first line, up to
    LAUNCHER_HEAD_ROOM characters, still fits; the rest of the diagnosis fills what remains."""
    parts = [text if host is None else f"[{host}] {text}" for host, text in user_texts if text and text.strip()]
    if not parts:
        return diagnosis
    user = "\n".join(part.strip() for part in parts)
    launcher = LAUNCHER_PREFIX + diagnosis
    head = launcher.partition("\n")[0]
    # fit() cuts a first line that leaves it 20 characters or fewer: reserve those too.
    user_room = limit - 1 - min(len(head) + 21, LAUNCHER_HEAD_ROOM)
    if len(user) > user_room:
        user = user[: user_room - len(USER_TEXT_CUT)].rstrip() + USER_TEXT_CUT
    return f"{user}\n{fit(launcher, limit - len(user) - 1)}"

"""Failure reports: what SageMaker shows users (the first 1024 characters of /opt/ml/output/failure).

The cause goes first (which host or rank, exit code or signal, the error line or the native crash), then
the detail. The parsers of mpirun's output are pure and unit-tested on captured text; a rank's native crash
report is read by crashes.py.

A failure file the user's own program wrote during the job is kept: its text comes first, then the
launcher's diagnosis (the toolkit keeps the user's file and drops its own message; we keep both). The job's
outcome files of an earlier run in the same directory are cleared at the start (SDK local mode and
scripts/local_job.py can reuse a directory; on SageMaker it starts empty), so what is there at the end was
written by this job.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sagemaker_mxnet_horovod.crashes import NativeCrash, untag

FAILURE_LIMIT = 1024

_PROCESS_NAME = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
_SIGNALED = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?")
_LOST_DAEMON = re.compile(r"Remote daemon:\s*\[\[\d+,\d+\],\d+\] on node (\S+)")


@dataclass(frozen=True)
class RankFailure:
    rank: int | None
    host: str | None
    exit_code: int | None = None
    signal_number: int | None = None
    lost_host: str | None = None


def parse_mpirun_failure(mpirun_lines: Iterable[str]) -> RankFailure | None:
    """Find the first failed rank in mpirun's own (untagged) output."""
    text = "\n".join(mpirun_lines)
    match = _LOST_DAEMON.search(text)
    if match:
        return RankFailure(rank=None, host=match.group(1), lost_host=match.group(1))
    match = _SIGNALED.search(text)
    if match:
        return RankFailure(rank=int(match.group(1)), host=match.group(2), signal_number=int(match.group(3)))
    rank = _PROCESS_NAME.search(text)
    code = _EXIT_CODE.search(text)
    if rank:
        return RankFailure(rank=int(rank.group(1)), host=None, exit_code=int(code.group(1)) if code else None)
    return None


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


def error_line(lines: Sequence[str]) -> str | None:
    """The line that names the error: the last non-blank stderr line, usually the exception."""
    for line in reversed(lines):
        if line.strip():
            return line.strip()
    return None


def rank_host(rank_hosts: Sequence[str], rank: int, unknown: str = "?") -> str:
    """The plan's name of the host a rank runs on (`unknown` for a rank beyond the plan)."""
    return rank_hosts[rank] if rank < len(rank_hosts) else unknown


def rank_failure_message(
    returncode: int,
    failure: RankFailure | None,
    rank_hosts: Sequence[str],
    rank_stderr: Mapping[int, Sequence[str]],
    mpirun_tail: Sequence[str],
    crashes: Mapping[int, NativeCrash] | None = None,
) -> str:
    """Cause first: which rank on which host, how it ended, its error line or native crash (crashes: the
    ranks' crash reports, from a crashes.CrashLog); then its last stderr lines."""
    crashes = crashes or {}
    if failure and failure.lost_host:
        head = (f"lost contact with host {failure.lost_host}: its MPI daemon died or the network to it failed "
                f"(mpirun exited with code {returncode})")
        return head + _tail_block("mpirun", mpirun_tail)
    if failure and failure.rank is not None:
        rank = failure.rank
        # The plan's names, not mpirun's: mpirun knows the master by its container hostname.
        host = rank_host(rank_hosts, rank, failure.host or "?")
        if failure.signal_number is not None:
            how = f"was killed by {signal_name(failure.signal_number)}"
        elif failure.exit_code is not None:
            how = describe_exit(failure.exit_code)
        else:
            how = "failed"
        lines = rank_stderr.get(rank, ())
        cause = error_line(lines)
        root = root_cause_rank(rank, rank_stderr, crashes) if is_consequence(cause) and rank not in crashes \
            else None
        if root is not None:
            # mpirun names the first rank to exit, which may only have noticed another rank's failure.
            root_host = rank_host(rank_hosts, root)
            failed = (f"crashed with {crashes[root].describe()}" if root in crashes
                      else f"failed: {error_line(rank_stderr[root])}")
            head = f"rank {root} on {root_host} {failed} (then rank {rank} on {host} {how}: {_short(cause)})"
            return head + _tail_block(f"rank {root} stderr", rank_stderr.get(root, ()))
        if rank in crashes:
            head = f"rank {rank} on {host} {crashed(crashes[rank], how)}"
        else:
            head = f"rank {rank} on {host} {how}" + (f": {cause}" if cause else "")
        return head + _tail_block(f"rank {rank} stderr", lines)
    # No rank named: the first rank that crashed, else the first that wrote to stderr, is the best lead.
    if crashes:
        rank = min(crashes)
        host = rank_host(rank_hosts, rank)
        return (f"mpirun {describe_exit(returncode)}; rank {rank} on {host} crashed with {crashes[rank].describe()}"
                + _tail_block(f"rank {rank} stderr", rank_stderr.get(rank, ())))
    for rank in sorted(rank_stderr):
        cause = error_line(rank_stderr[rank])
        if cause:
            host = rank_host(rank_hosts, rank)
            return (f"mpirun {describe_exit(returncode)}; rank {rank} on {host} reported: {cause}"
                    + _tail_block(f"rank {rank} stderr", rank_stderr[rank]))
    cause = first_meaningful_line(mpirun_tail)
    return (f"mpirun {describe_exit(returncode)}" + (f": {cause}" if cause else "")
            + _tail_block("mpirun", mpirun_tail[-10:]))


# Errors a rank reports because another rank failed, not a cause of their own.
_CONSEQUENCES = ("Horovod has been shut down", "peer process has unexpectedly disconnected")


def is_consequence(line: str | None) -> bool:
    return bool(line) and any(text in line for text in _CONSEQUENCES)


def crashed(crash: NativeCrash, how: str) -> str:
    """'crashed with SIGSEGV (...) in f (lib.so); then it exited with code 255': the crash report's signal
    is the cause; how the rank ended (mpirun's report) may be a later failure, such as an abort on exit."""
    if how == f"was killed by {crash.signal_name}":
        return f"was killed by {crash.describe()}"
    return f"crashed with {crash.describe()}; then it {how}"


def root_cause_rank(reported: int, rank_stderr: Mapping[int, Sequence[str]],
                    crashes: Mapping[int, NativeCrash] | None = None) -> int | None:
    """Another rank that crashed or whose last error is a cause of its own, when the reported rank's is a
    consequence."""
    for rank in sorted(crashes or {}):
        if rank != reported:
            return rank
    for rank in sorted(rank_stderr):
        cause = error_line(rank_stderr[rank])
        if rank != reported and cause and not is_consequence(cause):
            return rank
    return None


def _short(line: str | None, limit: int = 80) -> str:
    text = line or ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_meaningful_line(lines: Sequence[str]) -> str | None:
    """mpirun's first line of its own that is not decoration: usually the cause (an ssh error, say)."""
    for line in lines:
        text = line.strip()
        if text and not set(text) <= set("-=*"):
            return text
    return None


def process_failure_message(program: str, host: str, returncode: int, stderr: Sequence[str],
                            crash: NativeCrash | None = None) -> str:
    """A program run without MPI: no ranks, just the process, its crash or error line, its last stderr lines."""
    if crash:
        head = f"{program} on {host} {crashed(crash, describe_exit(returncode))}"
    else:
        cause = error_line(stderr)
        head = f"{program} on {host} {describe_exit(returncode)}" + (f": {cause}" if cause else "")
    return head + _tail_block(f"{program} stderr", stderr)


def _tail_block(title: str, lines: Sequence[str]) -> str:
    # mpirun tags every piece a rank writes: pieces of one line leave tags in the middle of it.
    lines = [untag(line) for line in lines if line.strip()]
    if not lines:
        return ""
    return f"\n--- last lines of {title} ---\n" + "\n".join(lines)


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


def read_user_failure(path: Path, limit: int = FAILURE_LIMIT) -> str | None:
    """What the user's program wrote to the failure file during this job (stripped), None if nothing."""
    try:
        with path.open(encoding="utf-8", errors="replace") as file:
            text = file.read(limit).strip()
    except (FileNotFoundError, IsADirectoryError):
        return None
    return text or None


def clear_previous_outcome(output_dir: Path) -> list[str]:
    """Remove `failure` and `success` left by an earlier run in this directory; describes each removed."""
    removed = []
    for name in ("failure", "success"):
        path = output_dir / name
        if path.is_file():
            first = (read_user_failure(path) or "").partition("\n")[0]
            path.unlink()
            removed.append(f"{path}" + (f" ({_short(first)})" if first else ""))
    return removed


def write_success(output_dir: Path) -> Path:
    """The empty `success` file the toolkit writes after a successful job."""
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / "success"
    path.write_text("")
    return path


def write_failure(path: Path, message: str) -> str:
    """Write the failure file atomically; returns what was written."""
    text = fit(message)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text + "\n")
    os.replace(tmp, path)
    return text

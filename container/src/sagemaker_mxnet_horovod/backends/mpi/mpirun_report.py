"""Which of mpirun's ranks failed and how: mpirun's own report (pure parsers, unit-tested on captured text), the
ranks' stderr tails and native crash reports (diagnose/crashes.py), as one Failure (output.py hands it to the run's
verdict). mpirun names the first rank to exit, which may only have noticed another rank's failure: the rank with a
cause of its own is named instead."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sagemaker_mxnet_horovod.core.failure import (
    Failure,
    describe_exit,
    error_line,
    rank_host,
    shorten,
    signal_name,
)
from sagemaker_mxnet_horovod.diagnose.crashes import NativeCrash
from sagemaker_mxnet_horovod.diagnose.process_failure import crashed

_PROCESS_NAME = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
_SIGNALED = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?")
_LOST_DAEMON = re.compile(r"Remote daemon:\s*\[\[\d+,\d+\],\d+\] on node (\S+)")
# Errors a rank reports because another rank failed, not a cause of their own.
_CONSEQUENCES = ("Horovod has been shut down", "peer process has unexpectedly disconnected")


@dataclass(frozen=True)
class MpirunReport:
    """What mpirun's own (untagged) output says about the first failure."""

    rank: int | None
    host: str | None
    exit_code: int | None = None
    signal_number: int | None = None
    lost_host: str | None = None


def parse_mpirun_report(mpirun_lines: Iterable[str]) -> MpirunReport | None:
    """Find the first failed rank in mpirun's own (untagged) output."""
    text = "\n".join(mpirun_lines)
    match = _LOST_DAEMON.search(text)
    if match:
        return MpirunReport(rank=None, host=match.group(1), lost_host=match.group(1))
    match = _SIGNALED.search(text)
    if match:
        return MpirunReport(rank=int(match.group(1)), host=match.group(2), signal_number=int(match.group(3)))
    rank = _PROCESS_NAME.search(text)
    code = _EXIT_CODE.search(text)
    if rank:
        return MpirunReport(rank=int(rank.group(1)), host=None, exit_code=int(code.group(1)) if code else None)
    return None


def is_consequence(line: str | None) -> bool:
    return bool(line) and any(text in line for text in _CONSEQUENCES)


def noticed_line(lines: Sequence[str], crash: NativeCrash | None) -> str | None:
    """The line saying the rank only noticed another's failure, if that is all its failure is: its error line;
    or, when it aborted (SIGABRT) on its way out, any line of its stderr (Horovod's shutdown error, then the
    abort's own report, which ends the stderr)."""
    if crash is None:
        cause = error_line(lines)
        return cause if is_consequence(cause) else None
    if crash.signal_number != signal.SIGABRT:
        return None
    return next((line.strip() for line in lines if is_consequence(line)), None)


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


def first_meaningful_line(lines: Sequence[str]) -> str | None:
    """mpirun's first line of its own that is not decoration: usually the cause (an ssh error, say)."""
    for line in lines:
        text = line.strip()
        if text and not set(text) <= set("-=*"):
            return text
    return None


def rank_failure(
    returncode: int,
    report: MpirunReport | None,
    rank_hosts: Sequence[str],
    rank_stderr: Mapping[int, Sequence[str]],
    mpirun_tail: Sequence[str],
    crashes: Mapping[int, NativeCrash] | None = None,
) -> Failure:
    """Cause first: which rank on which host, how it ended, its error line or native crash (crashes: the
    ranks' crash reports, from a crashes.CrashLog); then its last stderr lines."""
    crashes = crashes or {}
    if report and report.lost_host:
        return Failure(f"lost contact with host {report.lost_host}: its MPI daemon died or the network to it "
                       f"failed (mpirun exited with code {returncode})", host=report.lost_host,
                       tail_title="mpirun", tail=tuple(mpirun_tail))
    if report and report.rank is not None:
        return reported_rank_failure(report, rank_hosts, rank_stderr, crashes)
    # No rank named: the first rank that crashed, else the first that wrote to stderr, is the best lead.
    if crashes:
        rank = min(crashes)
        return Failure(f"mpirun {describe_exit(returncode)}; rank {rank} on {rank_host(rank_hosts, rank)} crashed "
                       f"with {crashes[rank].describe()}", host=rank_host(rank_hosts, rank), rank=rank,
                       signal_number=crashes[rank].signal_number, tail_title=f"rank {rank} stderr",
                       tail=tuple(rank_stderr.get(rank, ())))
    for rank in sorted(rank_stderr):
        cause = error_line(rank_stderr[rank])
        if cause:
            return Failure(f"mpirun {describe_exit(returncode)}; rank {rank} on {rank_host(rank_hosts, rank)} "
                           f"reported: {cause}", host=rank_host(rank_hosts, rank), rank=rank,
                           tail_title=f"rank {rank} stderr", tail=tuple(rank_stderr[rank]))
    cause = first_meaningful_line(mpirun_tail)
    return Failure(f"mpirun {describe_exit(returncode)}" + (f": {cause}" if cause else ""),
                   tail_title="mpirun", tail=tuple(mpirun_tail[-10:]))


def reported_rank_failure(report: MpirunReport, rank_hosts: Sequence[str],
                          rank_stderr: Mapping[int, Sequence[str]], crashes: Mapping[int, NativeCrash]) -> Failure:
    """The rank mpirun names, or the rank with a cause of its own when the named one only noticed it."""
    rank = report.rank
    # The plan's names, not mpirun's: mpirun knows the master by its container hostname.
    host = rank_host(rank_hosts, rank, report.host or "?")
    if report.signal_number is not None:
        how = f"was killed by {signal_name(report.signal_number)}"
    elif report.exit_code is not None:
        how = describe_exit(report.exit_code)
    else:
        how = "failed"
    lines = tuple(rank_stderr.get(rank, ()))
    cause = error_line(lines)
    noticed = noticed_line(lines, crashes.get(rank))
    root = root_cause_rank(rank, rank_stderr, crashes) if noticed else None
    if root is not None:
        root_host = rank_host(rank_hosts, root)
        failed = (f"crashed with {crashes[root].describe()}" if root in crashes
                  else f"failed: {error_line(rank_stderr[root])}")
        return Failure(f"rank {root} on {root_host} {failed} (then rank {rank} on {host} {how}: {shorten(noticed)})",
                       host=root_host, rank=root,
                       signal_number=crashes[root].signal_number if root in crashes else None,
                       tail_title=f"rank {root} stderr", tail=tuple(rank_stderr.get(root, ())))
    if rank in crashes:
        head = f"rank {rank} on {host} {crashed(crashes[rank], how)}"
        signal_number = crashes[rank].signal_number
    else:
        head = f"rank {rank} on {host} {how}" + (f": {cause}" if cause else "")
        signal_number = report.signal_number
    return Failure(head, host=host, rank=rank, signal_number=signal_number, tail_title=f"rank {rank} stderr",
                   tail=lines)

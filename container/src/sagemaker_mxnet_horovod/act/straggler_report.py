"""The straggler report at the job's end, on the host where rank 0 wrote it (sagemaker_mxnet_straggler, in every MPI
rank; the master under MPI): its verdict and its path in the log, and its chart drawn beside it. Whatever ended the job
(a failure, a stop): the report holds what rank 0 had combined by then. The chart is drawn here, in a process of its
own with a deadline (30 s; after a stop, no later than 10 s before SageMaker's SIGKILL), not in rank 0: a rank killed
with the job draws nothing, and matplotlib stays out of training."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from sagemaker_mxnet_straggler.hook import OFF, VARIABLE

CHART_DEADLINE_S = 30.0
# After a stop, the chart ends this long before SageMaker's SIGKILL at the latest: the launcher still has the outcome
# files to write.
KILL_MARGIN_S = 10.0


def report_directory(plan_env: Mapping[str, str], env: Mapping[str, str]) -> str | None:
    """Where the ranks were told to write it: the launcher's default, or the user's own value."""
    directory = plan_env.get(VARIABLE) or env.get(VARIABLE) or ""
    return None if directory.strip().lower() in OFF else directory


def finish(directory: str | None, since: float, seconds_to_kill: float | None, log: Callable[[str], None],
           python: str = sys.executable) -> None:
    """The report's verdict and path, and its chart (drawn by `python`), if rank 0 wrote one here during this job
    (since: its start, by this host's clock: an earlier job's report in a reused directory is not this job's).
    seconds_to_kill: after a stop, the time left before SageMaker's SIGKILL (core/stop.py)."""
    from sagemaker_mxnet_straggler.report import CHART, REPORT

    report = Path(directory or "") / REPORT
    try:
        if not directory or report.stat().st_mtime < since:
            return
        verdict = json.loads(report.read_text())["verdict"]["text"]
    except FileNotFoundError:
        return
    except (OSError, ValueError, KeyError, TypeError) as error:
        log(f"straggler report: {report} cannot be read: {error}")
        return
    log(f"straggler report: {verdict}")
    chart = report.with_name(CHART)
    deadline = CHART_DEADLINE_S if seconds_to_kill is None else min(CHART_DEADLINE_S, seconds_to_kill - KILL_MARGIN_S)
    problem = draw(python, report, chart, deadline) if deadline > 0 else "no time left before SageMaker's SIGKILL"
    log(f"straggler report: {report}" + (f", chart {chart}" if problem is None else f" (no chart: {problem})"))


def draw(python: str, report: Path, chart: Path, deadline_s: float) -> str | None:
    """The chart (sagemaker_mxnet_straggler.chart) in its own process; None, or why there is none."""
    try:
        done = subprocess.run([python, "-m", "sagemaker_mxnet_straggler.chart", str(report), str(chart)],
                              capture_output=True, text=True, timeout=deadline_s, check=False)
    except subprocess.TimeoutExpired:
        return f"not drawn within {deadline_s:g} s"
    except OSError as error:
        return str(error)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    return None

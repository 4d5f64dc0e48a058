"""act/straggler_report.py: at the job's end, the report rank 0 wrote during this job is said (its verdict, its path)
and its chart drawn in a process of its own, within a deadline; a report of an earlier job, or none, says nothing. The
chart's process is a stand-in interpreter here (matplotlib is the image's: tests/image/test_straggler.py draws)."""

import json
import os
import stat
import time

from sagemaker_mxnet_horovod.act.straggler_report import finish, report_directory
from sagemaker_mxnet_straggler.figures import Figures, Sample
from sagemaker_mxnet_straggler.report import write_report


def written(directory):
    figures = Figures(["algo-1", "algo-2"])
    for index in range(6):
        figures.add(Sample(20 + 10 * index, index, [0.3, 0.1], [0.5, 0.5]), 10)
    return write_report(str(directory), figures, 10, 10)


def interpreter(tmp_path, body):
    """An executable standing in for `python`: `-m sagemaker_mxnet_straggler.chart REPORT CHART` runs body."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_verdict_and_the_paths_are_said_and_the_chart_drawn_beside_the_report(tmp_path):
    report = written(tmp_path / "straggler")
    lines = []
    finish(str(tmp_path / "straggler"), time.time() - 60, None, lines.append,
           python=interpreter(tmp_path, 'test "$2" = sagemaker_mxnet_straggler.chart && echo png > "$4"'))
    verdict = json.loads(open(report).read())["verdict"]["text"]
    assert verdict.startswith("rank 1 on algo-2 reaches each step 0.20 s after the median rank")
    chart = tmp_path / "straggler" / "lateness.png"
    assert lines == [f"straggler report: {verdict}", f"straggler report: {report}, chart {chart}"]
    assert chart.read_text() == "png\n"


def test_a_chart_that_fails_or_takes_too_long_is_said_and_the_report_stays(tmp_path):
    report = written(tmp_path)
    lines = []
    finish(str(tmp_path), 0, None, lines.append,
           python=interpreter(tmp_path, 'echo "ModuleNotFoundError: No module named matplotlib" >&2; exit 1'))
    assert lines[-1] == f"straggler report: {report} (no chart: ModuleNotFoundError: No module named matplotlib)"
    # After a stop, the chart must end 10 s before SageMaker's SIGKILL: here 10.3 s were left.
    started = time.monotonic()
    finish(str(tmp_path), 0, 10.3, lines.append, python=interpreter(tmp_path, "exec sleep 30"))
    assert lines[-1] == f"straggler report: {report} (no chart: not drawn within 0.3 s)"
    assert time.monotonic() - started < 10
    finish(str(tmp_path), 0, 8, lines.append, python=interpreter(tmp_path, "exec sleep 30"))
    assert lines[-2:] == [f"straggler report: {json.loads(open(report).read())['verdict']['text']}",
                          f"straggler report: {report} (no chart: no time left before SageMaker's SIGKILL)"]


def test_nothing_is_said_without_a_report_of_this_job(tmp_path):
    lines = []
    finish(str(tmp_path), 0, None, lines.append)  # none written
    finish(None, 0, None, lines.append)  # off
    report = written(tmp_path)
    os.utime(report, (time.time() - 3600, time.time() - 3600))  # an earlier job's, in a reused directory
    finish(str(tmp_path), time.time() - 60, None, lines.append)
    assert lines == []


def test_an_unreadable_report_is_said(tmp_path):
    (tmp_path / "report.json").write_text('{"verdict": ')
    lines = []
    finish(str(tmp_path), 0, None, lines.append)
    assert len(lines) == 1 and lines[0].startswith(f"straggler report: {tmp_path / 'report.json'} cannot be read: ")


def test_the_directory_is_the_launchers_default_or_the_users_own_and_off_is_none():
    default = {"SMMH_STRAGGLER_REPORT": "/opt/ml/output/data/straggler"}
    assert report_directory(default, {}) == "/opt/ml/output/data/straggler"
    assert report_directory({}, {"SMMH_STRAGGLER_REPORT": "/data/mine"}) == "/data/mine"
    assert report_directory({}, {"SMMH_STRAGGLER_REPORT": "off"}) is None
    assert report_directory({}, {}) is None

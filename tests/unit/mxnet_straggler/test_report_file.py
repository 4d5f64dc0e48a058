"""report.py: the report's figures per rank (worked out by hand from the samples), its text, and the samples in it,
from which the same verdict comes again (the chart draws from them)."""

import json
import math
import os

import pytest
from sagemaker_mxnet_straggler.figures import Figures, Sample, judge
from sagemaker_mxnet_straggler.report import REPORT, report, samples_of, write_report

HOSTS = ["algo-1", "algo-1", "algo-2", "algo-2"]


def job():
    """Rank 3 arrives 0.1 s after the others, then 0.3 s; steps of 0.5 s, then 0.7 s; 10 steps a sample, then 25 (a
    spacing in seconds on steps that got shorter)."""
    figures = Figures(list(HOSTS))
    figures.add(Sample(20, 0.0, [0.11, 0.11, 0.11, 0.01], [math.nan] * 4), 10)
    figures.add(Sample(30, 5.0, [0.11, 0.11, 0.11, 0.01], [0.5] * 4), 10)
    figures.add(Sample(55, 22.5, [0.31, 0.31, 0.31, 0.01], [0.7] * 4), 25)
    return figures


def test_each_ranks_steps_median_step_median_lateness_and_time_waited():
    rows = report(job(), every_s=0, start_steps=10)["ranks"]
    # The first sample has no step time: 10 + 25 steps timed; waited beyond the latest rank: 0.1 s x 10 steps, then
    # 0.3 s x 25 steps.
    assert rows[0] == {"rank": 0, "host": "algo-1", "steps": 35, "median_step_s": 0.6, "median_lateness_s": 0.0,
                       "late_share": 0.0, "waited_on_others_s": 8.5, "waited_share": round(8.5 / (35 * 0.6), 4)}
    assert rows[3]["median_lateness_s"] == pytest.approx(0.1) and rows[3]["waited_on_others_s"] == 0.0
    assert rows[3]["late_share"] == 1.0
    assert [row["host"] for row in rows] == HOSTS


def test_the_report_says_which_steps_it_covers_and_its_verdict():
    figures = job()
    for index in range(1, 6):
        figures.add(Sample(55 + 15 * index, 22.5 + 7.5 * index, [0.11, 0.11, 0.11, 0.01], [0.5] * 4), 15)
    written = report(figures, every_s=7.5, start_steps=10, last_met=145)
    assert written["steps"] == {"first_timed": 20, "last_timed": 130, "timed_every": 15, "timed_every_s": 7.5,
                                "start_steps_not_timed": 10, "samples": 8, "samples_kept": 8, "last_met": 145}
    assert written["verdict"]["text"] == judge(figures).text()
    assert written["verdict"]["ranks"] == [3] and written["verdict"]["stands_out"]
    assert written["verdict"]["share"] == pytest.approx(0.2)


def test_the_samples_in_the_report_give_back_the_same_figures(tmp_path):
    figures = job()
    path = write_report(str(tmp_path / "straggler"), figures, every_s=0, start_steps=10)
    assert path == str(tmp_path / "straggler" / REPORT) and os.listdir(tmp_path / "straggler") == [REPORT]
    again = Figures([row["host"] for row in json.loads(open(path).read())["ranks"]])
    for step, at, waits, times, spanned in samples_of(json.loads(open(path).read())):
        again.add(Sample(step, at, waits, times), spanned)
    for redone, kept in zip(again.rank_medians(), figures.rank_medians()):
        assert redone == pytest.approx(kept)
    assert again.waited_s == pytest.approx(figures.waited_s)


def test_the_file_is_json_a_person_reads_a_line_per_rank_and_is_replaced_whole(tmp_path):
    path = write_report(str(tmp_path), job(), every_s=0, start_steps=10)
    text = open(path).read()
    assert [line for line in text.splitlines() if line.startswith('  {"rank": ')][3].startswith(
        '  {"rank": 3, "host": "algo-2", "steps": 35, ')
    write_report(str(tmp_path), Figures(list(HOSTS)), every_s=0, start_steps=10)
    assert json.loads(open(path).read())["steps"]["samples"] == 0 and os.listdir(tmp_path) == [REPORT]


def test_a_job_too_short_for_a_verdict_is_told_what_sets_the_spacing():
    short = Figures(list(HOSTS))
    short.add(Sample(30, 0.0, [0.11, 0.11, 0.11, 0.01], [math.nan] * 4), 10)
    assert report(short, every_s=10, start_steps=20)["verdict"]["text"] == (
        "fewer than 5 timed steps: no verdict (a step timed about every 10 s; a shorter job needs a smaller "
        "horovod_straggler_every_s)")
    assert report(short, every_s=0, start_steps=20)["verdict"]["text"] == "fewer than 5 timed steps: no verdict"

"""The straggler report as JSON (REPORT in the report's directory, /opt/ml/output/data/straggler/ under the launcher,
uploaded in output.tar.gz): the verdict; per rank its host, timed steps, median step time, median lateness, share of
the steps it was late in, and time waited on the others; the samples themselves (every rank's wait and step time, an
even spread over the job), which chart.py draws. Standard library only: rank 0 writes it, the launcher reads it."""

from __future__ import annotations

import json
import math
import os

from sagemaker_mxnet_straggler.figures import CONSISTENT, EVERY, MIN_SAMPLES, STANDOUT_SHARE, Figures, judge

REPORT = "report.json"
CHART = "lateness.png"
SAMPLE_VALUES = 50_000  # samples listed x ranks, at most: the file stays small enough to rewrite every minute


def number(value: float, digits: int = 6):
    return None if math.isnan(value) else round(value, digits)


def rank_rows(figures: Figures) -> list[dict]:
    (late, step_times), late_shares = figures.rank_medians(), figures.late_shares()
    rows = []
    for rank, host in enumerate(figures.hosts):
        timed_s = figures.timed_steps * step_times[rank]
        waited = figures.waited_s[rank] if figures.waited_s else 0.0
        rows.append({"rank": rank, "host": host, "steps": figures.timed_steps,
                     "median_step_s": number(step_times[rank]), "median_lateness_s": number(late[rank]),
                     "late_share": number(late_shares[rank], 4),
                     "waited_on_others_s": number(waited, 3),
                     "waited_share": number(waited / timed_s if timed_s > 0 else math.nan, 4)})
    return rows


def report(figures: Figures, every_s: float, start_steps: int, last_met: int | None = None) -> dict:
    """last_met: the step of the ranks' last meeting, whose figures would come at the next one."""
    verdict = judge(figures)
    listed = max(MIN_SAMPLES, SAMPLE_VALUES // max(1, len(figures.hosts)))
    spread = figures.kept[::max(1, math.ceil(len(figures.kept) / listed))]
    return {
        "verdict": {"text": verdict_text(verdict, every_s), "stands_out": verdict.stands_out,
                    "ranks": list(verdict.ranks),
                    "host": verdict.host, "whole_host": verdict.whole_host, "lateness_s": number(verdict.lateness_s),
                    "step_s": number(verdict.step_s), "share": number(verdict.share, 4),
                    "late_share": number(verdict.late_share, 4),
                    "also": [[rank, host, number(late)] for rank, host, late in verdict.also]},
        # timed_every: the steps the last sample stood for (at least EVERY, about every_s seconds of steps)
        "steps": {"first_timed": figures.first_step, "last_timed": figures.last_step,
                  "timed_every": figures.kept[-1].spanned if figures.kept else None, "timed_every_s": every_s,
                  "start_steps_not_timed": start_steps, "samples": figures.received, "samples_kept": len(figures.kept),
                  "last_met": last_met},
        "standout_share": STANDOUT_SHARE, "consistent_share": CONSISTENT,
        "ranks": rank_rows(figures),
        "samples": {"step": [s.step for s in spread], "seconds": [round(s.seconds, 3) for s in spread],
                    "wait_s": [[number(v) for v in s.waits] for s in spread],
                    "step_s": [[number(v) for v in s.step_times] for s in spread],
                    "spanned": [s.spanned for s in spread]},
    }


def verdict_text(verdict, every_s: float) -> str:
    """The verdict's text; with too few timed steps, also how often a step was timed and what sets it (a short job)."""
    if verdict.ranks or not every_s:
        return verdict.text()
    return (f"{verdict.text()} (a step timed about every {every_s:g} s; a shorter job needs a smaller "
            "horovod_straggler_every_s)")


def write_report(directory: str, figures: Figures, every_s: float, start_steps: int,
                 last_met: int | None = None) -> str:
    """REPORT in directory, replaced atomically; returns its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, REPORT)
    partial = f"{path}.{os.getpid()}"
    with open(partial, "w") as file:
        file.write(to_text(report(figures, every_s, start_steps, last_met)))
    os.replace(partial, path)
    return path


def to_text(report_dict: dict) -> str:
    """JSON a person can read: a line per key, and per rank."""
    parts = []
    for key, value in report_dict.items():
        if key == "ranks":
            rows = ",\n".join("  " + json.dumps(row) for row in value)
            parts.append(f' "ranks": [\n{rows}\n ]')
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def samples_of(report_dict: dict) -> list:
    """The report's samples as (step, seconds, waits, step times, steps stood for), nan for a missing figure: to redo
    the figures from a report (the chart, the tests' recorded jobs; those before spanned was written: EVERY each)."""
    samples = report_dict["samples"]
    def numbers(values):
        return [math.nan if value is None else value for value in values]

    spanned = samples.get("spanned", [EVERY] * len(samples["step"]))
    return [(step, seconds, numbers(waits), numbers(times), steps) for step, seconds, waits, times, steps in
            zip(samples["step"], samples["seconds"], samples["wait_s"], samples["step_s"], spanned)]

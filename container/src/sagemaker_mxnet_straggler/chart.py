"""The straggler report's chart, read at a glance: above, each rank's lateness over the job (the ranks that stand out
in colour, the others grey); below, each rank's median lateness, coloured by host, against the line a rank must
cross to stand out. The verdict is the title. Drawn by the launcher at the job's end from the report (report.py):

    python -m sagemaker_mxnet_straggler.chart /opt/ml/output/data/straggler/report.json  # lateness.png beside it
"""

from __future__ import annotations

import json
import os
import sys
import textwrap

from sagemaker_mxnet_straggler.figures import EVERY, lateness
from sagemaker_mxnet_straggler.report import CHART, samples_of

SMOOTHING = 5  # samples in each point's running median: one late step is noise, a run of them is not


def running_median(values: list, width: int = SMOOTHING) -> list:
    points = []
    for index in range(len(values)):
        window = sorted(values[max(0, index - width + 1):index + 1])
        points.append(window[len(window) // 2])
    return points


def draw(report: dict, path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    ranks, verdict, samples = report["ranks"], report["verdict"], samples_of(report)
    standing_out = {*verdict["ranks"], *(rank for rank, _, _ in verdict["also"])} if verdict["stands_out"] else set()
    hosts = sorted({rank["host"] for rank in ranks})
    colours = {host: pyplot.get_cmap("tab10")(index % 10) for index, host in enumerate(hosts)}
    step_s = verdict["step_s"] or 0
    threshold_ms = report["standout_share"] * step_s * 1000
    figure, (over_time, by_rank) = pyplot.subplots(2, 1, figsize=(10, 7), height_ratios=(3, 2))
    minutes = [seconds / 60 for _, seconds, _, _, _ in samples]
    late = [lateness(waits) for _, _, waits, _, _ in samples]
    loud_colours, loud, quiet = pyplot.get_cmap("Dark2"), 0, 0
    for rank in ranks:
        points = [v * 1000 for v in running_median([row[rank["rank"]] for row in late])]
        if rank["rank"] in standing_out:
            over_time.plot(minutes, points, linewidth=2, zorder=3, color=loud_colours(loud % 8),
                           label=f"rank {rank['rank']} ({rank['host']})")
            loud += 1
        else:
            over_time.plot(minutes, points, linewidth=0.8, color="0.6", zorder=2,
                           label=None if quiet else "the other ranks")
            quiet += 1
    over_time.axhline(threshold_ms, color="firebrick", linestyle="--", linewidth=1,
                      label=f"stands out: {report['standout_share']:.0%} of a step")
    over_time.axhline(0, color="black", linewidth=0.5)
    over_time.set_xlabel("minutes since the first timed step")
    over_time.set_ylabel("lateness after the median rank (ms)")
    over_time.legend(loc="upper left", fontsize="small")
    late_ms = [(rank["median_lateness_s"] or 0) * 1000 for rank in ranks]
    by_rank.bar([rank["rank"] for rank in ranks], late_ms, color=[colours[rank["host"]] for rank in ranks])
    by_rank.axhline(threshold_ms, color="firebrick", linestyle="--", linewidth=1)
    by_rank.axhline(0, color="black", linewidth=0.5)
    by_rank.set_xlabel("rank (colour: host)")
    if len(ranks) <= 32:
        by_rank.set_xticks([rank["rank"] for rank in ranks])
    by_rank.set_ylabel("median lateness (ms)")
    by_rank.legend(handles=[matplotlib.patches.Patch(color=colours[host], label=host) for host in hosts[:10]],
                   fontsize="small", ncol=min(5, len(hosts)))
    steps = report["steps"]
    figure.suptitle("\n".join(textwrap.wrap(verdict["text"], 90)) +
                    f"\n(steps {steps['first_timed']}-{steps['last_timed']}, {timed_how(steps)})",
                    fontsize="medium")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return path


def timed_how(steps: dict) -> str:
    """'one in 10 timed', or with a spacing in seconds 'one about every 10 s timed, the last 1 in 154'."""
    every_s = steps.get("timed_every_s") or 0
    if not every_s or steps["timed_every"] is None or steps["timed_every"] <= EVERY:
        return f"one in {steps['timed_every']} timed"
    return f"one about every {every_s:g} s timed, the last 1 in {steps['timed_every']}"


def main(argv: list) -> int:
    if len(argv) not in (1, 2):
        sys.exit("usage: python -m sagemaker_mxnet_straggler.chart REPORT.json [CHART.png]")
    with open(argv[0]) as file:
        report = json.load(file)
    print(draw(report, argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(argv[0]), CHART)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Curves drawn from a study's own JSON output, with matplotlib (not part of the stdlib the studies need otherwise:
`pip install -r requirements-charts.txt` into the Python that draws). A chart is redrawn from its JSON alone, so a
page's PNG and the figures it shows come from one run."""

from __future__ import annotations

import json
import statistics
from pathlib import Path


def pyplot():
    """matplotlib's pyplot on a file-only backend, or a clear exit naming what to install."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("charts need matplotlib: pip install -r requirements-charts.txt") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def launcher_scale(record_path: Path, png: Path) -> None:
    """Overhead by host count (benchmarks/launcher_scale.py's --json): the median of each launcher's runs per host
    count, every run as a dot, on a log scale (this launcher's ~1 s and the toolkit's ~35 s on one chart)."""
    record = json.loads(Path(record_path).read_text())
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for launcher, label, marker in (("ours", "this launcher (train)", "o"),
                                    ("toolkit", "sagemaker-training toolkit", "s")):
        runs = {int(hosts): seconds for hosts, seconds in record["overhead"].get(launcher, {}).items() if seconds}
        if not runs:
            continue
        counts = sorted(runs)
        line = axes.plot(counts, [statistics.median(runs[n]) for n in counts], marker=marker, label=label)[0]
        for n in counts:
            axes.scatter([n] * len(runs[n]), runs[n], color=line.get_color(), alpha=0.35, s=12)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xticks(record["hosts"], [str(n) for n in record["hosts"]])
    axes.set_xlabel("hosts (one container each, 2 shared cores)")
    axes.set_ylabel("overhead, s (median; dots: each run)")
    counted = "the start gate" if record["start_gate"] else "the first container's start"
    axes.set_title(f"Launcher overhead by host count, counted from {counted}", fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="center right")
    figure.text(0.01, 0.01, f"{record['image']}; {record['repeat']} round(s); load {record['load_start']} -> "
                f"{record['load_end']} (1/5/15 min)", fontsize=7, alpha=0.7)
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    figure.savefig(png)
    plt.close(figure)

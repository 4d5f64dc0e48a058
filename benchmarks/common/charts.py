"""Curves drawn from a study's own JSON output, with matplotlib (not part of the stdlib the studies need otherwise:
`pip install -r requirements-charts.txt` into the Python that draws). A chart is redrawn from its JSON alone, so a
page's PNG and the figures it shows come from one run."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from benchmarks.common.scaling_jobs import efficiency


def add_options(parser, written: str, drawn: str) -> None:
    """A study's --json (what it writes), --chart (what it draws from that JSON) and --redraw options."""
    parser.add_argument("--json", type=Path, help=written)
    parser.add_argument("--chart", type=Path, help=f"draw {drawn} from --json as this PNG "
                        "(matplotlib: requirements-charts.txt)")
    parser.add_argument("--redraw", action="store_true", help="only draw --chart from an existing --json")


def redraw_only(parser, args, draw) -> bool:
    """Check the chart options (add_options); with --redraw, draw(--json, --chart) and say so (the study stops)."""
    if (args.chart or args.redraw) and not args.json:
        parser.error("--chart and --redraw draw from --json: give it")
    if args.redraw and not args.chart:
        parser.error("--redraw draws --chart: give it")
    if args.redraw:
        draw(args.json, args.chart)
    return args.redraw


def pyplot():
    """matplotlib's pyplot on a file-only backend, or a clear exit naming what to install."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("charts need matplotlib: pip install -r requirements-charts.txt") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt



def first_epoch(record_path: Path, png: Path) -> None:
    """Epoch seconds by epoch index (benchmarks/first_epoch.py's --json): per configuration the median of the
    rounds, every round as a dot; the legend gives the threads per rank (the launcher's start log) and each round's
    first epoch / the median of its epochs 2..N; the note under it the most CPU other processes took in an epoch."""
    record = json.loads(Path(record_path).read_text())
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    epochs = list(range(1, record["epochs"] + 1))
    for name, results in record["runs"].items():
        if not results:
            continue
        per_epoch = [[result["epoch_seconds"][e - 1] for result in results] for e in epochs]
        ratios = ", ".join(f"{r['epoch_seconds'][0] / statistics.median(r['epoch_seconds'][1:]):.2f}" for r in results)
        threads = results[0]["omp"].split()[0]
        line = axes.plot(epochs, [statistics.median(seconds) for seconds in per_epoch], marker="o",
                         label=f"{name}: {threads} thread(s) per rank; first / steady {ratios}")[0]
        for epoch, seconds in zip(epochs, per_epoch):
            axes.scatter([epoch] * len(seconds), seconds, color=line.get_color(), alpha=0.35, s=12)
    axes.set_xticks(epochs)
    axes.set_ylim(bottom=0)
    axes.set_xlabel("epoch")
    axes.set_ylabel("epoch time, s (median; dots: each round)")
    axes.set_title("First epoch against steady ones: MNIST, 2 hosts x 1 rank, 2 shared cores", fontsize=10)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    other = max((x for results in record["runs"].values() for r in results for x in r["other_cpu"] if x is not None),
                default=None)
    figure.text(0.01, 0.01, f"{record['image']}; {record['repeat']} round(s); {record['cores']} cores; load "
                f"{record['load_start']} -> {record['load_end']} (1/5/15 min)" + ("" if other is None else
                f"\nprocesses outside the job took up to {other:.2f} CPU-s/s in an epoch"), fontsize=7, alpha=0.7)
    figure.tight_layout(rect=(0, 0.05, 1, 1))
    figure.savefig(png)
    plt.close(figure)


# parameter_server_scaling's layouts as drawn: label, line style; Horovod's the thick line.
SCALING_LAYOUTS = {"horovod": ("Horovod", {"linewidth": 2.5, "marker": "o"}),
                   "ps 1 server": ("parameter server, 1 server", {"marker": "s"}),
                   "ps 1:1": ("parameter server, 1:1", {"marker": "^"}),
                   "ps 2:1": ("parameter server, 2:1", {"marker": "v"}),
                   "control": ("control: N independent jobs", {"marker": "x", "linestyle": ":", "color": "grey"})}


def scaling_curves(record: dict) -> dict:
    """What scaling_efficiency draws from benchmarks/parameter_server_scaling.py's --json: model -> layout (those
    every worker count has) -> per worker count N (= hosts), (N, the efficiency of the rounds' medians: median
    throughput / (N x the median of one worker alone), [each round's own: its throughput / (N x its alone)])."""
    curves = {}
    for model in record["models"]:
        by_workers = {int(workers): layouts for workers, layouts in record["rates"].get(model, {}).items()}
        counts = sorted(by_workers)
        curves[model] = {
            layout: [(n, efficiency(statistics.median(by_workers[n][layout]), n,
                                    statistics.median(by_workers[n]["alone"])),
                      [efficiency(rate, n, alone) for rate, alone in zip(by_workers[n][layout], by_workers[n]["alone"])])
                     for n in counts]
            for layout in SCALING_LAYOUTS if counts and all(by_workers[n].get(layout) for n in counts)}
    return {model: curve for model, curve in curves.items() if curve}


def scaling_efficiency(record_path: Path, png: Path) -> None:
    """Efficiency by worker (= host) count (scaling_curves), one panel per model: throughput / (N x one worker alone
    with the same CPU), Horovod's definition, per layout; the line through the medians of the rounds, each round's
    own ratio as a dot; linear = 1.0."""
    record = json.loads(Path(record_path).read_text())
    curves = scaling_curves(record)
    plt = pyplot()
    figure, panels = plt.subplots(1, len(curves), figsize=(6.4 * len(curves), 4.2), dpi=100, squeeze=False)
    for axes, (model, layouts) in zip(panels[0], curves.items()):
        counts = sorted(int(workers) for workers in record["rates"][model])
        axes.axhline(1.0, color="black", linewidth=1, linestyle="--", label="linear (N x one worker alone)")
        for layout, points in layouts.items():
            label, style = SCALING_LAYOUTS[layout]
            line = axes.plot([n for n, _, _ in points], [median for _, median, _ in points], label=label, **style)[0]
            for n, _, rounds in points:
                axes.scatter([n] * len(rounds), rounds, color=line.get_color(), alpha=0.35, s=12)
        axes.set_xticks(counts, [str(n) for n in counts])
        axes.margins(x=0.15)
        axes.set_ylim(0, max(1.25, axes.get_ylim()[1]))
        axes.set_xlabel("workers = hosts, 1 each (2: a core each; 4: half a core each)")
        axes.set_ylabel("efficiency: throughput / (N x alone)")
        axes.set_title(f"Scaling efficiency by host count: {model}", fontsize=10)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8)
    figure.text(0.01, 0.01, f"{record['image']}; {record['repeat']} round(s) (line: medians; dots: each round); "
                f"{record['cores']} cores\nload {record['load_start']} -> {record['load_end']} (1/5/15 min)",
                fontsize=7, alpha=0.7)
    figure.tight_layout(rect=(0, 0.05, 1, 1))
    figure.savefig(png)
    plt.close(figure)

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


# AWS's published efficiencies at 3 hosts of 8 V100s, at each model's own ratio (docs/benchmarks/link-scaling.md,
# "The ratio, derived"): (label, link ratio, efficiency, where the label sits in points from the star)
AWS_POINTS = (("Faster R-CNN, ml.p3.16xlarge", 0.67, 0.62, (5, -10)),
              ("Faster R-CNN, ml.p3dn.24xlarge", 0.21, 0.80, (5, -12)),
              ("Mask R-CNN, ml.p3.16xlarge", 0.49, 0.76, (5, -10)),
              ("Mask R-CNN, ml.p3dn.24xlarge", 0.16, 0.82, (5, 6)))


def link_sweep(record_path: Path, png: Path) -> None:
    """Efficiency against the link ratio (benchmarks/link_scaling.py's --json): per workload and variant the median
    of the rounds, each round as a dot; the probe's overlap limit dashed; AWS's published points; linear = 1.0."""
    record = json.loads(Path(record_path).read_text())
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(6.8, 4.4), dpi=100)
    axes.axhline(1.0, color="black", linewidth=1, linestyle="--", label="linear")
    for name, workload in record["workloads"].items():
        shaped = sorted((r for r in workload["ratios"] if r["ratio"] is not None), key=lambda r: r["ratio"])
        limits = [(r["ratio"], statistics.median(r["limits"])) for r in shaped if r["limits"]]
        if limits:
            axes.plot(*zip(*limits), linestyle=":", color="grey", label=f"{name}: overlap limit")
        for variant in (shaped[0]["variants"] if shaped else {}):
            points = [(r["ratio"], r["variants"][variant]) for r in shaped if r["variants"].get(variant)]
            if not points:
                continue
            label = name if variant == "defaults" else f"{name}, {variant}"
            line = axes.plot([x for x, _ in points], [statistics.median(v) for _, v in points], marker="o",
                             label=label)[0]
            for x, values in points:
                axes.scatter([x] * len(values), values, color=line.get_color(), alpha=0.35, s=12)
    for label, ratio, published, offset in AWS_POINTS:
        axes.scatter([ratio], [published], marker="*", s=90, color="black", zorder=3)
        axes.annotate(f"AWS: {label}", (ratio, published), textcoords="offset points", xytext=offset, fontsize=7)
    axes.set_xlabel("link ratio (a host's bytes a step / link rate / compute a step)")
    axes.set_ylabel("efficiency (throughput / N x one rank alone)")
    axes.set_ylim(0, 1.1)
    axes.set_title(f"{record['hosts']} hosts x 1 rank on emulated links ({record['congestion_control']}, "
                   f"{record['queue_ms']:g} ms queue)", fontsize=10)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, loc="lower left")
    figure.text(0.01, 0.01, f"{record['image']}; {record['repeat']} round(s); load at the end {record['load_end']}",
                fontsize=7, alpha=0.7)
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    figure.savefig(png)
    plt.close(figure)

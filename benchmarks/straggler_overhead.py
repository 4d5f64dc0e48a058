#!/usr/bin/env python3
"""What the straggler report costs a step: the built-in MNIST and Faster R-CNN with horovod_straggler_report on (the
default) and off, side by side.

2 hosts x 1 rank, each host on a core of its own (docker --cpuset-cpus, as the scaling studies), the two settings
alternating within each round so that a change in the machine's load hits both alike. On: every rank times a step
about every 10 s (horovod_straggler_every_s), at least 10 steps apart, after the 20th (it waits for its gradients,
meets the others in a small allgather, then pushes its allreduces: that step loses its overlap of the backward pass
with the allreduces) and rank 0 combines the figures. Per model:
each setting's steady throughput per round (MNIST: the epochs after the first, metrics.json; Faster R-CNN: the
iterations after the 20th, from rank 0's per-iteration lines), the ratio off/on per round, and their median: the
cost of a step, (off/on - 1). A job with the report on must have written it (report.json); one with it off must not.
Also within each job, where rounds' noise does not reach: the timed steps' (and the next ones') extra time over the
job's usual step, as a share of the job's time, from rank 0's line per step (MNIST runs at log-interval 1 here), at
the steps the "on" job's report says the ranks met at; the same arithmetic on the job with the report off, at the same
steps, and on every job at the places between them (placebos), is the estimate's own spread. Each Faster R-CNN job's
seconds per iteration are printed.

Run it on a quiet machine: a 1% effect is well inside what other work on 2 cores moves a job's throughput by.

  python3 -m benchmarks.straggler_overhead [--image sagemaker-mxnet-horovod:cpu] [--models mnist faster_rcnn]
      [--data MNIST_DIR] [--train 60000] [--epochs 3] [--iterations 60] [--short 192] [--repeat 5] [--cpu-shares N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from benchmarks.common.machine import load
from benchmarks.common.scaling_jobs import CONFIGURATIONS, RCNN_ITERATION, job_spec, prepare_data, steady_rate
from scripts.local_job import run_job

SETTINGS = {"on": "true", "off": "false"}  # horovod_straggler_report
LAYOUT = "2 hosts x 1 rank"
# A Faster R-CNN iteration: RANKS images; MNIST's step: RANKS batches.
RANKS = CONFIGURATIONS[LAYOUT][0] * CONFIGURATIONS[LAYOUT][1]
MNIST_BATCH = 64
REPORT = Path("output") / "data" / "straggler" / "report.json"


def one_job(image: str, data: Path, model_args, setting: str,
            workdir: Path) -> tuple[float, dict[int, float], dict | None]:
    """(the job's steady rate, its seconds by step, its report: the "on" job's only)."""
    hosts, per_host, cpusets = CONFIGURATIONS[LAYOUT]
    batch = 1 if model_args.model == "faster_rcnn" else MNIST_BATCH
    spec = job_spec(image, data, batch, model_args, hosts, per_host, cpusets)
    spec.hyperparameters["horovod_straggler_report"] = SETTINGS[setting]
    if model_args.model == "mnist":
        spec.hyperparameters["log-interval"] = "1"  # a line per step, for the within-job estimate
    spec.cpu_shares = model_args.cpu_shares
    result = run_job(spec, workdir)
    rate = steady_rate(result, f"{model_args.model}, report {setting}")
    if model_args.model == "faster_rcnn":
        seconds = iteration_seconds(result.master.logs)
        rate = timed_phase_rate(seconds)
        print(f"{model_args.model}, report {setting}, seconds per iteration: "
              + " ".join(f"{i}:{t:.2f}" for i, t in sorted(seconds.items())), flush=True)
    else:
        seconds = mnist_step_seconds(result.master.logs)
    report = result.master.root / REPORT
    if report.exists() != (setting == "on"):
        sys.exit(f"benchmark: {model_args.model} with the report {setting}: report.json "
                 f"{'missing' if setting == 'on' else 'written'}\n{result.describe()}")
    written = json.loads(report.read_text()) if setting == "on" else None
    return rate, seconds, written


def iteration_seconds(logs: str) -> dict[int, float]:
    """Faster R-CNN's seconds per iteration, by iteration (1-based, the trainer's step count), from rank 0's lines:
    with log-interval 1 each line's rate is over its own iteration, of 2 images (one per rank)."""
    return {int(m[1]): RANKS / float(m[2]) for m in map(RCNN_ITERATION.search, logs.splitlines()) if m}


MNIST_STEP = re.compile(r"epoch=(\d+) batch=(\d+)/(\d+) .*samples_per_sec=(\S+)")


def mnist_step_seconds(logs: str) -> dict[int, float]:
    """MNIST's seconds per step, by step of the job (1-based, the trainer's count, over the epochs), from rank 0's
    lines at log-interval 1: each line's rate is its step's samples of every rank (batch x ranks, nominally: the
    last, smaller batch of an epoch too) over the time since the last line (or the epoch's start)."""
    seconds = {}
    for m in filter(None, map(MNIST_STEP.search, logs.splitlines())):
        epoch, step, steps, rate = int(m[1]), int(m[2]), int(m[3]), float(m[4])
        seconds[(epoch - 1) * steps + step] = MNIST_BATCH * RANKS / rate
    return seconds


START = 20  # the recorder's: steps 1-20 not timed; the ranks meet at 30, 40, then about every 10 s (at least 10 apart)
PLACEBO_OFFSETS = range(2, 9)  # pairs clear of the timed ones: the ranks meet at least 10 steps apart


def timed_steps(report: dict) -> list[int]:
    """The steps at which the ranks met, from the job's report: every sample's, and the last meeting's (its figures
    would have come at the next)."""
    return [*report["samples"]["step"], *([report["steps"]["last_met"]] if report["steps"].get("last_met") else [])]


def extra_share(seconds: dict[int, float], timed: list[int], offset: int = 0) -> float:
    """The share of the job's time (from iteration START + 2) that the iterations `offset` after the timed ones and
    the ones after them (whose work may wait for a timed step's late allreduces) add over the job's usual iteration
    (the median of the others). At offset 0: what the report's timed steps cost. At offsets 2-8, where nothing is
    timed: the same arithmetic at places like any other, the estimate's own spread (placebos)."""
    measured = {i: t for i, t in seconds.items() if i >= START + 2}
    for last in [t for t in timed if t in measured and t + 1 not in measured]:
        del measured[last]  # a timed last iteration: no next one to count with it
    at = [t + offset for t in timed if t + offset in measured and t + offset + 1 in measured]
    touched = {*at, *(i + 1 for i in at)}
    usual = statistics.median(t for i, t in measured.items() if i not in touched)
    extra = sum(measured[i] + measured[i + 1] - 2 * usual for i in at)
    return extra / (usual * len(measured))


def timed_steps_cost(seconds: dict[int, float], timed: list[int]) -> tuple[float, list[float]]:
    """(the timed steps' extra share, the placebos': the same at offsets 2-8, clear of the timed pairs)."""
    return extra_share(seconds, timed), [extra_share(seconds, timed, offset) for offset in PLACEBO_OFFSETS]


def six_steps_share(seconds: dict[int, float], timed: list[int]) -> float:
    """The extra share of the job's time of the timed steps and the five after each (offsets 0-5: three pairs): what
    a timed step costs net of what the next steps give back (on MNIST's short steps the time attributed to a timed
    step and the next is partly made up by the two pairs after)."""
    return sum(extra_share(seconds, timed, offset) for offset in (0, 2, 4))


def timed_phase_rate(seconds: dict[int, float]) -> float:
    """Faster R-CNN's images/s over the iterations after the 20th, where one in 10 is timed: all of them, the timed
    ones included (the scaling studies' median of the iterations' rates would leave those out)."""
    after = [t for i, t in seconds.items() if i > START]
    if not after:
        sys.exit("benchmark: no Faster R-CNN iteration after the 20th: --iterations must be more than 30")
    return RANKS * len(after) / sum(after)  # an image per rank an iteration


def model_rounds(image: str, model: str, args, tmp: Path) -> dict:
    model_args = SimpleNamespace(model=model, epochs=args.epochs, iterations=args.iterations, short=args.short,
                                 data=args.data, train=args.train, image=image, cpu_shares=args.cpu_shares)
    data = prepare_data(model_args, tmp / model)
    rates: dict = {setting: [] for setting in SETTINGS}
    within: dict = {setting: [] for setting in SETTINGS}
    for round_ in range(args.repeat):
        order = list(SETTINGS) if round_ % 2 == 0 else list(reversed(SETTINGS))
        jobs = {}
        for setting in order:
            started = time.monotonic()
            jobs[setting] = one_job(image, data, model_args, setting, tmp / f"{model}-{round_}-{setting}")
            print(f"{model} round {round_ + 1}, report {setting}: {jobs[setting][0]:.4g} samples/s "
                  f"({time.monotonic() - started:.0f} s, load {load()})", flush=True)
        report = jobs["on"][2]
        timed = timed_steps(report)  # the "off" job's at the same steps: nothing happens there
        for setting in SETTINGS:
            rate, seconds, _ = jobs[setting]
            cost = (*timed_steps_cost(seconds, timed), six_steps_share(seconds, timed))
            rates[setting].append(rate)
            within[setting].append(cost)
            print(f"{model} round {round_ + 1}, report {setting}: the timed steps' extra share of the job "
                  f"{cost[0]:+.2%} (placebos {' '.join(f'{c:+.2%}' for c in cost[1])}; with the 5 steps after each "
                  f"{cost[2]:+.2%})" + (f"; {len(timed)} timed, {timed[:3]}...{timed[-1]}, "
                                        f"{report['verdict']['text']}" if setting == "on" else ""), flush=True)
    return {"rates": rates, "within": within}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--models", nargs="+", choices=["mnist", "faster_rcnn"], default=["mnist", "faster_rcnn"])
    parser.add_argument("--data", type=Path, help="MNIST's IDX .gz files (train/, test/); default: synthetic digits")
    # 60,000: 1,407 steps a job, about 9 timed at one about every 10 s (the first two 10 steps apart)
    parser.add_argument("--train", type=int, default=60000, help="MNIST training digits")
    parser.add_argument("--epochs", type=int, default=3, help="MNIST epochs (the first is not counted)")
    parser.add_argument("--iterations", type=int, default=60, help="Faster R-CNN iterations (more than 30)")
    parser.add_argument("--short", type=int, default=192, help="Faster R-CNN's image short side")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cpu-shares", type=int, default=0,
                        help="docker --cpu-shares of the jobs' containers: ahead of other work on a shared machine")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load {load()} at the start")
    results = {}
    with tempfile.TemporaryDirectory(prefix="straggler-overhead-") as tmp:
        for model in args.models:
            results[model] = model_rounds(args.image, model, args, Path(tmp))
    print(f"\n{LAYOUT}, one core each; {args.repeat} rounds, the settings alternating; load {load()} at the end")
    print(f"{'model':<12} {'off samples/s':>14} {'on samples/s':>13} {'off/on per round':<40} {'cost of a step':>15}")
    for model, result in results.items():
        rates = result["rates"]
        ratios = [off / on for off, on in zip(rates["off"], rates["on"])]
        print(f"{model:<12} {statistics.median(rates['off']):14.4g} {statistics.median(rates['on']):13.4g} "
              f"{' '.join(f'{r:.3f}' for r in ratios):<40} {statistics.median(ratios) - 1:+15.2%}")
    for model, result in results.items():
        within = result["within"]
        placebos = [c for setting in SETTINGS for _, costs, _ in within[setting] for c in costs]
        print(f"{model}: within each job, the timed steps' extra share of its time: on "
              f"{' '.join(f'{c:+.2%}' for c, _, _ in within['on'])}; off (the same steps, nothing timed) "
              f"{' '.join(f'{c:+.2%}' for c, _, _ in within['off'])}; at the other offsets of every job, where "
              f"nothing is timed: median {statistics.median(placebos):+.2%}, standard deviation "
              f"{statistics.stdev(placebos):.2%} over {len(placebos)}")
        net = [on[2] - off[2] for on, off in zip(within["on"], within["off"])]
        print(f"{model}: the timed steps with the 5 after each, on minus off, per round: "
              f"{' '.join(f'{d:+.2%}' for d in net)}" + (f"; mean {statistics.mean(net):+.2%}, standard error "
                                                        f"{statistics.stdev(net) / len(net) ** 0.5:.2%}"
                                                        if len(net) > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Where two 1-core Horovod ranks lose throughput, and which settings win it back: MNIST as in
weak_scaling.py (one core per rank by cpuset), the control (two independent 1-rank jobs at once, one per
core) and variants of one layout, each set as a user would (job environment or mpirun options), alternating
within each round.

For every run it prints global samples/s, the ratio to the control, and where each rank's core went:
CPU seconds per training step of each rank's threads, sampled from /proc (the MXNet engine's compute thread,
Python's main thread, Horovod's background thread: the one seen in clock_nanosleep, its cycle sleep; other
threads), of Open MPI's daemons (orted, mpirun) and of the rest of the containers, plus the step's wall time.
With --timeline, one more run of the first variant writes Horovod's timeline on rank 0 (the launcher's
horovod_timeline hyperparameter), and its allreduces are split per step into negotiation (waiting until every
rank has submitted the tensor: the slowest rank's compute plus coordination cycles) and the allreduce itself.
A variant that makes the job fail is reported as FAILED and the run goes on. Figures: docs/benchmarks/horovod-tuning.md.

  python3 -m benchmarks.horovod_tuning --image IMAGE --data /path/to/mnist [--layout "2 hosts x 1 rank"]
      [--batch 64] [--variant 'name:ENV=VALUE,ENV=VALUE' ...] [--mpi-option 'name:-mca x y' ...]
      [--repeat 2] [--timeline]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from benchmarks.common import scaling_jobs as ws
from benchmarks.common.machine import load
from benchmarks.common.rank_cpu import ROLES, CpuSampler, per_rank_step
from scripts.local_job import run_job

DEFAULT_VARIANTS = [
    "launcher defaults:",
    "launcher defaults, again:",  # A/A: the spread between two runs of the same thing
    "cycle 2 ms:HOROVOD_CYCLE_TIME=2",
    "cycle 10 ms:HOROVOD_CYCLE_TIME=10",
    "MXNet NaiveEngine:MXNET_ENGINE_TYPE=NaiveEngine",
]


def parse_variant(text: str, mpi: bool) -> tuple[str, dict, list]:
    name, _, spec = text.partition(":")
    if mpi:
        return name, {}, shlex.split(spec)
    env = dict(item.split("=", 1) for item in spec.split(",") if item)
    return name, env, []


def run(layout: str, image: str, data: Path, args, env: dict, mpi_options: list, workdir: Path,
        hyperparameters: dict | None = None):
    hosts, per_host, cpusets = ws.CONFIGURATIONS[layout]
    spec = ws.job_spec(image, data, args.batch, args, hosts, per_host, cpusets)
    spec.env.update(env)
    spec.hyperparameters.update(hyperparameters or {})
    if mpi_options:
        spec.hyperparameters["sagemaker_mpi_custom_mpi_options"] = shlex.join(mpi_options)
    with CpuSampler() as sampler:
        result = run_job(spec, workdir)
    rate = ws.steady_rate(result, layout)
    history = json.loads((result.master.root / "model" / "metrics.json").read_text())["history"]
    return rate, per_rank_step(sampler.seconds_by_role(), history, args.batch), history, result


def run_control(image: str, data: Path, args, workdir: Path):
    with CpuSampler() as sampler:
        rate, results = ws.run_control(image, data, args.batch, workdir, args, keep_results=True)
    samples = [epoch for result in results for epoch in
               json.loads((result.master.root / "model" / "metrics.json").read_text())["history"]]
    return rate, per_rank_step(sampler.seconds_by_role(), samples, args.batch)


def timeline_split(path: Path, steps: int) -> dict:
    """Milliseconds per step that rank 0 spent with some tensor in each top-level timeline phase (union over
    tensors, so fused tensors count once), and in the activities inside ALLREDUCE."""
    text = path.read_text().rstrip().rstrip(",")
    events = json.loads(text if text.endswith("]") else text + "]")
    open_at: dict = defaultdict(list)  # pid -> stack of (name, ts)
    intervals: dict = defaultdict(list)  # phase -> [(start, end)]
    for event in events:
        phase, pid = event.get("ph"), event.get("pid")
        if phase == "B":
            depth = len(open_at[pid])
            open_at[pid].append((event["name"] if depth == 0 else f"  {event['name']}", event["ts"]))
        elif phase == "E" and open_at[pid]:
            name, start = open_at[pid].pop()
            intervals[name].append((start, event["ts"]))
    split = {}
    for name, spans in intervals.items():
        spans.sort()
        total, end = 0.0, None
        for start, stop in spans:
            if end is None or start > end:
                total += stop - start
                end = stop
            elif stop > end:
                total += stop - end
                end = stop
        split[name] = total / 1000 / max(steps, 1)
    return split


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--data", type=Path, help="real MNIST (as weak_scaling.py); default: synthetic")
    parser.add_argument("--layout", default="2 hosts x 1 rank", choices=["2 hosts x 1 rank", "1 host x 2 ranks"])
    parser.add_argument("--batch", type=int, default=64, help="per rank")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train", type=int, default=12000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--variant", action="append", help="NAME:ENV=VALUE,... (job environment)")
    parser.add_argument("--mpi-option", action="append", default=[],
                        help="NAME:OPTIONS (sagemaker_mpi_custom_mpi_options)")
    parser.add_argument("--timeline", action="store_true", help="one more run of the first variant with "
                        "Horovod's timeline")
    args = parser.parse_args()
    variants = [parse_variant(v, False) for v in (args.variant or DEFAULT_VARIANTS)]
    variants += [parse_variant(v, True) for v in args.mpi_option]

    rates: dict = defaultdict(list)
    cpu: dict = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="horovod-tuning-") as tmp:
        tmp = Path(tmp)
        data = ws.prepare_data(args, tmp)
        for round_ in range(args.repeat):
            before = load()
            control, roles = run_control(args.image, data, args, tmp / f"control-{round_}")
            rates["control"].append(control)
            cpu["control"].append(roles)
            print(f"round {round_ + 1} {'control (2 independent 1-rank jobs)':40s} {control:8.1f} samples/s "
                  f"(load before {before}, after {load()})", flush=True)
            for index, (name, env, mpi_options) in enumerate(variants):
                before = load()
                try:
                    rate, roles, _, _ = run(args.layout, args.image, data, args, env, mpi_options,
                                            tmp / f"run-{round_}-{index}")
                except SystemExit as failed:  # a variant that breaks the job is a result too
                    print(f"round {round_ + 1} {name:40s} FAILED: {str(failed)[:600]}", flush=True)
                    continue
                rates[name].append(rate)
                cpu[name].append(roles)
                print(f"round {round_ + 1} {name:40s} {rate:8.1f} samples/s {rate / control:5.2f} of control "
                      f"(load before {before}, after {load()})", flush=True)
        if args.timeline:
            name, env, mpi_options = variants[0]
            # The launcher's horovod_timeline hyperparameter: rank 0 writes output/data/horovod_timeline.json.
            rate, _, history, result = run(args.layout, args.image, data, args, env, mpi_options, tmp / "timeline",
                                           {"horovod_timeline": "true"})
            hosts, per_host, _ = ws.CONFIGURATIONS[args.layout]
            steps = sum(-(-epoch["train_samples"] // (args.batch * hosts * per_host)) for epoch in history)
            step_ms = sum(e["seconds"] for e in history) / steps * 1000
            split = timeline_split(result.master.root / "output" / "data" / "horovod_timeline.json", steps)
            print(f"\nHorovod timeline, rank 0, {name} ({rate:.1f} samples/s with the timeline on): "
                  f"step {step_ms:.1f} ms wall; per step, ms with some tensor in each phase:")
            for phase, ms in sorted(split.items(), key=lambda kv: -kv[1]):
                print(f"  {phase:40s} {ms:7.2f}")

    control = statistics.median(rates["control"])
    print(f"\nMNIST, {args.layout}, batch {args.batch} per rank, one core per rank, {args.repeat} round(s), "
          f"medians; control {control:.1f} samples/s; load at the end {load()}")
    print("CPU ms per rank-step (one rank's batch of", args.batch, "samples), by thread or process:")
    print(f"{'variant':40s} {'samples/s':>9s} {'/control':>8s} " + " ".join(f"{r:>13s}" for r in ROLES))
    for name in ["control", *(v[0] for v in variants)]:
        if not rates[name]:
            print(f"{name:40s} {'failed':>9s}")
            continue
        rate = statistics.median(rates[name])
        per_role = {r: statistics.median(c.get(r, 0.0) for c in cpu[name]) for r in ROLES}
        print(f"{name:40s} {rate:9.1f} {rate / control:8.2f} " + " ".join(f"{per_role[r]:13.1f}" for r in ROLES))
    return 0


if __name__ == "__main__":
    sys.exit(main())

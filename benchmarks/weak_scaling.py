#!/usr/bin/env python3
"""Weak-scaling efficiency of MNIST training as Horovod defines it, with the shared-machine control.

Efficiency = throughput of N ranks / (N x throughput of 1 rank), each rank with the same resources: one
core (docker --cpuset-cpus, OMP_NUM_THREADS=1) and a fixed batch per rank. Configurations, alternating
within each round so that a change in the machine's load hits all alike:

  1 host x 1 rank     one container on core 0
  2 hosts x 1 rank    two containers, cores 0 and 1, allreduce over the container network (TCP)
  1 host x 2 ranks    one container on cores 0-1, two ranks (shared memory)
  control             two independent 1-rank jobs at the same time, cores 0 and 1, no communication

On shared hardware two busy cores run slower than one busy core alone (memory bandwidth, caches, turbo), so
the control's summed throughput is the ceiling this machine allows two ranks; efficiency is printed both
ways: vs 2 x one rank alone (Horovod's definition) and vs the control. Each is run at batch 64 and at a
compute-bound batch (--batches). Throughput: global samples/s of the steady epochs (the first left out),
from the program's metrics.json; for Faster R-CNN (--model faster_rcnn: batch 1 per rank, random weights,
synthetic COCO) global images/s of iterations 2..N from rank 0's log lines. Needs 2 cores.

  python3 benchmarks/weak_scaling.py [--image sagemaker-mxnet-horovod:cpu] [--data path/to/mnist]
      [--batches 64 512] [--epochs 3] [--train 12000] [--repeat 2]
  python3 benchmarks/weak_scaling.py --model faster_rcnn [--iterations 4] [--short 320] [--repeat 1]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from local_job import DOCKER, Channel, JobSpec, run_job  # noqa: E402

# name -> (hosts, ranks per host, cpuset per host)
CONFIGURATIONS = {
    "1 host x 1 rank": (1, 1, {"algo-1": "0"}),
    "2 hosts x 1 rank": (2, 1, {"algo-1": "0", "algo-2": "1"}),
    "1 host x 2 ranks": (1, 2, {"algo-1": "0,1"}),
}
CONTROL = "control: 2 x 1 rank, independent"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def real_subset(source: Path, target: Path, train: int) -> None:
    """The first `train` training digits (and the first 2000 test digits) of real MNIST IDX .gz files, as IDX .gz."""
    for part, count in (("train", train), ("test", 2000)):
        (target / part).mkdir(parents=True)
        for name, sample_bytes in (("images.gz", 28 * 28), ("labels.gz", 1)):
            raw = gzip.decompress((source / part / name).read_bytes())
            header = 16 if sample_bytes > 1 else 8
            total = int.from_bytes(raw[4:8], "big")
            keep = total if count is None else min(count, total)
            body = raw[header:header + keep * sample_bytes]
            (target / part / name).write_bytes(gzip.compress(raw[:4] + keep.to_bytes(4, "big") + raw[8:header] + body))


def job_spec(image: str, data: Path, batch: int, args, hosts: int, per_host: int, cpusets: dict) -> JobSpec:
    if getattr(args, "model", "mnist") == "faster_rcnn":
        # Few iterations of the whole model from random weights, no validation (the data has none).
        hps = {"sagemaker_program": "faster_rcnn", "batch-size": str(batch), "short": str(args.short),
               "pretrained-base": "false", "num-workers": "0", "epochs": "1",
               "max-iterations-per-epoch": str(args.iterations), "log-interval": "1", "lr-warmup": "0",
               "resume": "false", "tensorboard": "false"}
        channels = [Channel("train", data)]
    else:
        hps = {"sagemaker_program": "mnist", "epochs": str(args.epochs), "batch-size": str(batch),
               "log-interval": "0", "save-checkpoints": "false", "tensorboard": "false"}
        channels = [Channel("train", data / "train"), Channel("test", data / "test")]
    hps["sagemaker_mpi_num_of_processes_per_host"] = str(per_host)
    # One core per rank: one OpenMP thread each (the launcher's default is cores / ranks, which a cpuset of
    # two cores for one rank would double).
    return JobSpec(image=image, hosts=hosts, hyperparameters=hps, cpusets=cpusets, timeout_s=1800,
                   env={"OMP_NUM_THREADS": "1"}, channels=channels)


RCNN_ITERATION = re.compile(r"epoch=\d+ iter=(\d+) .* samples_per_sec=(\S+)")


def steady_rate(result, name: str) -> float:
    if any(code != 0 for code in result.exit_codes) or result.timed_out:
        sys.exit(f"benchmark: {name} failed:\n{result.describe()}")
    metrics = result.master.root / "model" / "metrics.json"
    if not metrics.exists():  # R-CNN: rank 0's per-iteration lines (global images/s since the previous line)
        rates = {int(m[1]): float(m[2]) for m in map(RCNN_ITERATION.search, result.master.logs.splitlines()) if m}
        return statistics.median(rate for iteration, rate in rates.items() if iteration >= 2)
    history = json.loads(metrics.read_text())["history"]
    rates = [epoch["samples_per_sec"] for epoch in history]
    return statistics.median(rates[1:] or rates)


def run_configuration(name: str, image: str, data: Path, batch: int, workdir: Path, args) -> float:
    hosts, per_host, cpusets = CONFIGURATIONS[name]
    return steady_rate(run_job(job_spec(image, data, batch, args, hosts, per_host, cpusets), workdir), name)


def run_control(image: str, data: Path, batch: int, workdir: Path, args, keep_results: bool = False):
    """Two 1-rank jobs started together, one per core; their summed throughput (and the job results)."""
    results: dict = {}

    def one(core: str) -> None:
        spec = job_spec(image, data, batch, args, 1, 1, {"algo-1": core})
        results[core] = run_job(spec, workdir / f"core-{core}")

    threads = [threading.Thread(target=one, args=(core,)) for core in ("0", "1")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rate = sum(steady_rate(results[core], f"control on core {core}") for core in ("0", "1"))
    return (rate, list(results.values())) if keep_results else rate


def prepare_data(args, tmp: Path) -> Path:
    """MNIST for the runs under tmp: the first --train digits of --data, or synthetic digits; for R-CNN
    synthetic COCO images (enough for every rank's iterations)."""
    if getattr(args, "model", "mnist") == "faster_rcnn":
        subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp}:/data", "--entrypoint", "synth-data", args.image,
                        "coco", "/data/coco", "--train", str(2 * args.iterations), "--val", "0"],
                       check=True, stdout=subprocess.DEVNULL)
        return tmp / "coco"
    data = tmp / "mnist"
    if args.data:
        real_subset(args.data, data, args.train)
    else:
        subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp}:/data", "--entrypoint", "synth-data", args.image,
                        "mnist", "/data/mnist", "--train", str(args.train), "--test", "1000"],
                       check=True, stdout=subprocess.DEVNULL)
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 512], help="per rank")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train", type=int, default=12000, help="training samples")
    parser.add_argument("--data", type=Path, help="real MNIST (train/ and test/ with images.gz, labels.gz): "
                        "its first --train digits; default: synthetic digits")
    parser.add_argument("--repeat", type=int, default=2, help="rounds; configurations alternate within each")
    parser.add_argument("--model", choices=["mnist", "faster_rcnn"], default="mnist",
                        help="faster_rcnn: batch 1 per rank, --iterations (the first is not timed), --short")
    parser.add_argument("--iterations", type=int, default=4, help="R-CNN iterations per run")
    parser.add_argument("--short", type=int, default=320, help="R-CNN image short side")
    args = parser.parse_args()
    if args.model == "faster_rcnn":
        args.batches = [1]
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("benchmark: needs at least 2 cores")

    rates: dict = {}  # (batch, name) -> [samples/s]
    with tempfile.TemporaryDirectory(prefix="weak-scaling-") as tmp:
        tmp = Path(tmp)
        data = prepare_data(args, tmp)
        for round_ in range(args.repeat):
            for batch in args.batches:
                for index, name in enumerate([*CONFIGURATIONS, CONTROL]):
                    workdir = tmp / f"run-{round_}-{batch}-{index}"
                    before = load()
                    if name == CONTROL:
                        rate = run_control(args.image, data, batch, workdir, args)
                    else:
                        rate = run_configuration(name, args.image, data, batch, workdir, args)
                    rates.setdefault((batch, name), []).append(rate)
                    print(f"round {round_ + 1} batch {batch:4d} {name:34s} {rate:8.3f} samples/s "
                          f"(load before {before}, after {load()})", flush=True)

    print()
    if args.model == "faster_rcnn":
        print(f"Faster R-CNN weak scaling in {args.image}: one core per rank, short side {args.short}, "
              f"{args.iterations} iterations (the first not timed) x {args.repeat} rounds; images/s, medians of "
              f"rounds; load average at the end {load()}")
    else:
        print(f"MNIST weak scaling in {args.image}: one core per rank, {args.epochs} epochs x {args.repeat} rounds, "
              f"{args.train} samples; medians of rounds; load average at the end {load()}")
    print(f"{'batch/rank':>10s} {'configuration':34s} {'samples/s':>10s} {'vs 2 x 1 rank':>14s} {'vs control':>11s}")
    for batch in args.batches:
        one = statistics.median(rates[(batch, "1 host x 1 rank")])
        control = statistics.median(rates[(batch, CONTROL)])
        for name in [*CONFIGURATIONS, CONTROL]:
            rate = statistics.median(rates[(batch, name)])
            ranks = 1 if name == "1 host x 1 rank" else 2
            print(f"{batch:10d} {name:34s} {rate:10.3f} {rate / (ranks * one):14.2f} "
                  + (f"{rate / control:11.2f}" if ranks == 2 else f"{'-':>11s}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

  python3 -m benchmarks.weak_scaling [--image sagemaker-mxnet-horovod:cpu] [--data path/to/mnist]
      [--batches 64 512] [--epochs 3] [--train 12000] [--repeat 2]
  python3 -m benchmarks.weak_scaling --model faster_rcnn [--iterations 4] [--short 320] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.common.machine import load
from benchmarks.common.scaling_jobs import (
    CONFIGURATIONS,
    CONTROL,
    efficiency,
    prepare_data,
    run_configuration,
    run_control,
)


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
            print(f"{batch:10d} {name:34s} {rate:10.3f} {efficiency(rate, ranks, one):14.2f} "
                  + (f"{rate / control:11.2f}" if ranks == 2 else f"{'-':>11s}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""MNIST throughput in the CPU image (not a test): 1 rank, 2 ranks on one host, 2 hosts x 1 rank.

    python3 -m benchmarks.mnist_throughput [--image sagemaker-mxnet-horovod:cpu] [--epochs 3] [--repeat 2]

Every configuration is a SageMaker-like job run by the image's `train` (scripts/local_job.py), so each
gets the launcher's defaults (OMP_NUM_THREADS = cores / ranks per host, mpi_yield_when_idle when ranks
share cores). "2 hosts x 1 rank" pins each container to its own core (--cpuset-cpus), as two 1-core
hosts: the same 2 cores as the other rows, split across a network. Synthetic data from the image's
data tool. The first epoch of each run (graph build, allocator warm-up) is left out; configurations run
alternately --repeat times; median and best steady-state epoch rates (global samples/s) are compared,
the best being the least disturbed by other load on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts.local_job import DOCKER, Channel, JobSpec, run_job

CONFIGURATIONS = {  # name -> (hosts, processes per host, cpuset per host)
    "1 host x 1 rank": (1, 1, {}),
    "1 host x 2 ranks": (1, 2, {}),
    "2 hosts x 1 rank": (2, 1, {"algo-1": "0", "algo-2": "1"}),
}


def run(name: str, image: str, data: Path, workdir: Path, args) -> dict:
    hosts, per_host, cpusets = CONFIGURATIONS[name]
    hps = {"sagemaker_program": "mnist", "epochs": str(args.epochs), "batch-size": str(args.batch_size),
           "log-interval": "0", "save-checkpoints": "false", "tensorboard": "false",
           "sagemaker_mpi_num_of_processes_per_host": str(per_host)}
    spec = JobSpec(image=image, hosts=hosts, hyperparameters=hps, cpusets=cpusets, timeout_s=1800,
                   channels=[Channel("train", data / "train"), Channel("test", data / "test")])
    result = run_job(spec, workdir)
    if any(code != 0 for code in result.exit_codes) or result.timed_out:
        sys.exit(f"benchmark: {name} failed:\n{result.describe()}")
    metrics = json.loads((result.master.root / "model" / "metrics.json").read_text())
    rates = [h["samples_per_sec"] for h in metrics["history"]]
    return {"steady_rates": rates[1:] or rates, "val_accuracy": metrics["val_accuracy"], "wall_sec": result.seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train", type=int, default=12000, help="synthetic training samples")
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--repeat", type=int, default=2, help="runs per configuration, alternating")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("benchmark: needs at least 2 cores")

    load_before = os.getloadavg()[0]  # other work on the host skews the numbers: printed with them
    results: dict = {name: [] for name in CONFIGURATIONS}
    with tempfile.TemporaryDirectory(prefix="mnist-bench-") as tmp:
        tmp = Path(tmp)
        subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp}:/data", "--entrypoint", "synth-data", args.image,
                        "mnist", "/data/mnist", "--train", str(args.train), "--test", "1000"],
                       check=True, stdout=subprocess.DEVNULL)
        # Alternate the configurations so a burst of other load hits all alike.
        for repeat in range(args.repeat):
            for index, name in enumerate(CONFIGURATIONS):
                results[name].append(run(name, args.image, tmp / "mnist", tmp / f"run-{index}-{repeat}", args))

    print(f"mnist throughput in {args.image}, {args.epochs} epochs x {args.repeat} runs, batch "
          f"{args.batch_size}/rank, {args.train} samples; 1-min load average before/after: "
          f"{load_before:.2f}/{os.getloadavg()[0]:.2f}")
    print(f"{'configuration':<17} {'median samples/s':>17} {'best samples/s':>15} {'vs 1 rank':>10} {'val_acc':>8}"
          f" {'wall s':>7}   steady-state epochs (samples/s)")
    baseline = None
    for name, runs in results.items():
        rates = [rate for r in runs for rate in r["steady_rates"]]
        median, best = statistics.median(rates), max(rates)
        baseline = baseline or median
        print(f"{name:<17} {median:>17.1f} {best:>15.1f} {median / baseline:>9.2f}x "
              f"{min(r['val_accuracy'] for r in runs):>8.4f} {statistics.mean(r['wall_sec'] for r in runs):>7.1f}"
              f"   {' '.join(f'{x:.0f}' for x in rates)}")


if __name__ == "__main__":
    main()

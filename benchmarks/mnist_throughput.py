"""Throughput of entrypoints/mnist.py: 1 rank vs N ranks on this host (not a test).

    python benchmarks/mnist_throughput.py [--ranks 2] [--epochs 3] [--train 12000] [--batch-size 64]

Makes synthetic data with the data tool (or uses --data-dir with train/ and test/), runs one
process directly and N ranks under mpirun with ``mpi_yield_when_idle`` (spinning MPI progress
starves the compute threads when ranks share few cores), and prints global samples/s side by side.
The first epoch of each run (graph build, allocator warm-up) is left out; the configurations run
alternately --repeat times and the median and best steady-state epoch rates are compared (the best
is the least disturbed by other load on a shared host).
Each rank gets cores / ranks OpenMP threads (the entrypoint's default), the single process all cores.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / "entrypoints" / "mnist.py"
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-mca", "mpi_yield_when_idle", "1"]


def run(ranks, data_dir, workdir, args):
    workdir.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "OMPI_", "OMP_NUM_THREADS"))}
    env.update(SM_CHANNEL_TRAIN=str(data_dir / "train"), SM_CHANNEL_TEST=str(data_dir / "test"),
               SM_MODEL_DIR=str(workdir / "model"), SM_INPUT_DIR=str(workdir / "input"))
    argv = [args.python, str(MNIST), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
            "--log-interval", "0", "--save-checkpoints", "false", "--resume", "false",
            "--tensorboard", "false", "--checkpoint-dir", str(workdir / "checkpoints")]
    if ranks > 1:
        argv = [*MPIRUN, "-np", str(ranks), *argv]
    started = time.time()
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.time() - started
    if result.returncode != 0:
        sys.exit(f"benchmark: {ranks}-rank run failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    metrics = json.loads((workdir / "model" / "metrics.json").read_text())
    rates = [h["samples_per_sec"] for h in metrics["history"]]
    return {"steady_rates": rates[1:] or rates, "val_accuracy": metrics["val_accuracy"], "wall_sec": wall}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train", type=int, default=12000, help="synthetic training samples")
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--data-dir", type=Path, help="existing data (train/ and test/) instead of synthetic")
    parser.add_argument("--repeat", type=int, default=2, help="runs per configuration, alternating")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    if shutil.which("mpirun") is None:
        sys.exit("benchmark: mpirun not found")

    load_before = os.getloadavg()[0]  # other work on the host skews the numbers: printed with them
    results = {1: [], args.ranks: []}
    with tempfile.TemporaryDirectory(prefix="mnist-bench-") as tmp:
        tmp = Path(tmp)
        data_dir = args.data_dir
        if data_dir is None:
            data_dir = tmp / "data"
            subprocess.run([args.python, "-m", "sagemaker_mxnet_horovod.datatool", "mnist", str(data_dir),
                            "--train", str(args.train), "--test", "1000"],
                           check=True, stdout=subprocess.DEVNULL,
                           env=dict(os.environ, PYTHONPATH=str(ROOT / "container" / "src")))
        # Alternate the configurations so a burst of other load hits both alike.
        for repeat in range(args.repeat):
            for ranks in results:
                results[ranks].append(run(ranks, data_dir, tmp / f"r{ranks}-{repeat}", args))

    cores = len(os.sched_getaffinity(0))
    print(f"mnist throughput on {cores} cores, {args.epochs} epochs x {args.repeat} runs, batch "
          f"{args.batch_size}/rank, {args.train} samples; 1-min load average before/after: "
          f"{load_before:.2f}/{os.getloadavg()[0]:.2f}")
    print(f"{'ranks':>5} {'median samples/s':>17} {'best samples/s':>15} {'val_acc':>8} {'wall s':>7}"
          "   steady-state epochs (samples/s)")
    summary = {}
    for ranks, runs in results.items():
        rates = [rate for r in runs for rate in r["steady_rates"]]
        summary[ranks] = (statistics.median(rates), max(rates))
        epochs = " ".join(f"{x:.0f}" for x in rates)
        val_accuracy = min(r["val_accuracy"] for r in runs)
        wall = statistics.mean(r["wall_sec"] for r in runs)
        print(f"{ranks:>5} {summary[ranks][0]:>17.1f} {summary[ranks][1]:>15.1f} {val_accuracy:>8.4f} "
              f"{wall:>7.1f}   {epochs}")
    median_ratio = summary[args.ranks][0] / summary[1][0]
    best_ratio = summary[args.ranks][1] / summary[1][1]
    print(f"speed-up {args.ranks} ranks / 1 rank: {median_ratio:.2f}x (median), "
          f"{best_ratio:.2f}x (best epoch)")


if __name__ == "__main__":
    main()

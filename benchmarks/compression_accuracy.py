#!/usr/bin/env python3
"""What fp16 gradient compression (the launcher's horovod_gradient_compression) costs the built-in MNIST in
accuracy: the same 2-host job (a core per host, one rank each) with and without it, for each seed, side by side;
per epoch the validation accuracy and the training loss, from the program's metrics.json.

  python3 -m benchmarks.compression_accuracy --data path/to/mnist [--image sagemaker-mxnet-horovod:cpu]
      [--seeds 1 2 3] [--epochs 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.common.machine import load
from scripts.local_job import Channel, JobSpec, run_job

COMPRESSIONS = ("none", "fp16")


def train(args, data: Path, seed: int, compression: str, workdir: Path) -> list:
    hps = {"sagemaker_program": "mnist", "epochs": str(args.epochs), "batch-size": "64", "seed": str(seed),
           "log-interval": "0", "save-checkpoints": "false", "tensorboard": "false",
           "horovod_gradient_compression": compression}
    spec = JobSpec(image=args.image, hosts=2, hyperparameters=hps, cpusets={"algo-1": "0", "algo-2": "1"},
                   env={"OMP_NUM_THREADS": "1"}, timeout_s=3600,
                   channels=[Channel("train", data / "train"), Channel("test", data / "test")])
    result = run_job(spec, workdir)
    if result.exit_codes != [0, 0]:
        sys.exit(f"compression_accuracy: seed {seed}, {compression} failed:\n{result.describe()}")
    return json.loads((result.master.root / "model" / "metrics.json").read_text())["history"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--data", type=Path, required=True, help="real MNIST: train/ and test/ with images.gz, "
                        "labels.gz (IDX)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    final: dict = {c: [] for c in COMPRESSIONS}
    with tempfile.TemporaryDirectory(prefix="compression-accuracy-") as tmp:
        data = Path(tmp) / "mnist"
        for part in ("train", "test"):  # all 60000 and 10000 digits, read-only in the job
            shutil.copytree(args.data / part, data / part)
        for seed in args.seeds:
            for compression in COMPRESSIONS:
                history = train(args, data, seed, compression, Path(tmp) / f"{seed}-{compression}")
                final[compression].append(history[-1]["val_accuracy"])
                print(f"seed {seed} {compression:5s} val_accuracy by epoch "
                      + " ".join(f"{h['val_accuracy']:.4f}" for h in history)
                      + " | train_loss " + " ".join(f"{h['train_loss']:.4f}" for h in history)
                      + f" (load {load()})", flush=True)
    print(f"\nMNIST, 2 hosts x 1 rank, batch 64 per rank, {args.epochs} epochs, 60000 training digits, "
          f"10000 test digits; final validation accuracy per seed")
    for compression in COMPRESSIONS:
        values = final[compression]
        print(f"{compression:5s} median {statistics.median(values):.4f} ("
              + ", ".join(f"{v:.4f}" for v in values) + ")")
    differences = [f - n for f, n in zip(final["fp16"], final["none"])]
    print("fp16 - none, per seed: " + ", ".join(f"{d:+.4f}" for d in differences))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What SageMaker Debugger costs the built-in MNIST per step here, and what its hook and profiler write.

One host, one rank on one core (docker --cpuset-cpus 0, scripts/local_job.py), configurations alternating within
each round so that a change in the machine's load hits all alike:

  no Debugger            no debughookconfig.json, no profilerconfig.json (SDK v2 with debugger_hook_config=False)
  SDK v2 default hook    tests/fixtures/debugger/sdk-v2-default.debughookconfig.json: the losses every 500 steps
  + framework profiling  that, plus sdk-v2-framework-profile.profilerconfig.json (FrameworkProfile: detailed,
                         dataloader, Python, Horovod profiling from step 2 for 3 steps)
  weights+grads every 10 the weights, gradients and losses collections every 10 steps

Per configuration: the median time per step of the steady epoch (the last, from metrics.json), its ratio to no
Debugger, and what each wrote under /opt/ml/output/tensors and /opt/ml/output/profiler (files, MiB, steps;
"-": not even the directory).

  python3 -m benchmarks.debugger_overhead [--image sagemaker-mxnet-horovod:cpu] [--train 12000] [--epochs 2]
      [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts.local_job import DOCKER, Channel, JobSpec, run_job

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "debugger"
BATCH = 64


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


EVERY_10 = json.dumps({"S3OutputPath": "s3://bucket/job", "LocalPath": "/opt/ml/output/tensors",
                       "HookParameters": {"save_interval": "10"},
                       "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "gradients"},
                                                    {"CollectionName": "losses"}]})
CONFIGURATIONS = {
    "no Debugger": {},
    "SDK v2 default hook": {"debughookconfig.json": fixture("sdk-v2-default.debughookconfig.json")},
    "+ framework profiling": {"debughookconfig.json": fixture("sdk-v2-default.debughookconfig.json"),
                              "profilerconfig.json": fixture("sdk-v2-framework-profile.profilerconfig.json")},
    "weights+grads every 10": {"debughookconfig.json": EVERY_10},
}


def written(directory: Path) -> str:
    if not directory.is_dir():
        return "-"
    files = [p for p in directory.rglob("*") if p.is_file()]
    mib = sum(p.stat().st_size for p in files) / 2**20
    steps = {p.parent.name for p in files if p.parent.parent.name == "events"}
    return f"{len(files)} files, {mib:.2f} MiB, {len(steps)} steps" if files else "nothing"


def run(image: str, data: Path, workdir: Path, config_files: dict, epochs: int) -> tuple[float, str, str]:
    hps = {"sagemaker_program": "mnist", "epochs": str(epochs), "batch-size": str(BATCH), "log-interval": "0"}
    result = run_job(JobSpec(image=image, hosts=1, hyperparameters=hps, cpusets={"algo-1": "0"},
                             env={"OMP_NUM_THREADS": "1"}, config_files=config_files, timeout_s=1200,
                             channels=[Channel("train", data / "train"), Channel("test", data / "test")]), workdir)
    if result.exit_codes != [0]:
        sys.exit(result.describe())
    root = result.master.root
    last = json.loads((root / "model" / "metrics.json").read_text())["history"][-1]
    ms_per_step = 1000 * last["seconds"] / -(-last["train_samples"] // BATCH)
    return ms_per_step, written(root / "output" / "tensors"), written(root / "output" / "profiler")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--train", type=int, default=12000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="debugger-overhead-") as tmp:
        tmp = Path(tmp)
        subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp}:/data", "--entrypoint", "synth-data", args.image,
                        "mnist", "/data/mnist", "--train", str(args.train), "--test", "1000"], check=True,
                       capture_output=True)
        times: dict[str, list[float]] = {name: [] for name in CONFIGURATIONS}
        outputs: dict[str, tuple[str, str]] = {}
        for round_ in range(args.repeat):
            for name, config_files in CONFIGURATIONS.items():
                ms, tensors, profiler = run(args.image, tmp / "mnist", tmp / f"{round_}-{len(times[name])}-"
                                            f"{list(CONFIGURATIONS).index(name)}", config_files, args.epochs)
                times[name].append(ms)
                outputs[name] = (tensors, profiler)
                print(f"round {round_ + 1}: {name}: {ms:.2f} ms/step", flush=True)
        base = statistics.median(times["no Debugger"])
        print(f"\nMNIST, batch {BATCH}, 1 rank on 1 core, steady epoch; medians of {args.repeat} rounds")
        print(f"{'configuration':<24} {'ms/step':>8} {'vs none':>8}  tensors written / profiler written")
        for name, values in times.items():
            median = statistics.median(values)
            tensors, profiler = outputs[name]
            print(f"{name:<24} {median:8.2f} {median / base:8.3f}  {tensors} / {profiler}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""`make demo`: the main job. A 2-host Horovod MNIST training on two local containers of the CPU image.

Makes a synthetic MNIST data set with the image's own `synth-data` (no download), runs the job the way
SageMaker would (scripts/local_job/: per-host /opt/ml, algo-1/algo-2 on a private network,
`docker run IMAGE train`), then says where the model and logs landed and how accurate the model is.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from local_job import Channel, JobSpec, run_job

DOCKER = os.environ.get("DOCKER", "docker")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--out", type=Path, default=Path("out/demo"))
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    data = out / "data"
    data.mkdir(parents=True)
    print(f"demo: writing a synthetic MNIST data set to {data} (synth-data in the image)", flush=True)
    subprocess.run([DOCKER, "run", "--rm", "-v", f"{data}:/data", args.image, "synth-data", "mnist", "/data"],
                   check=True)

    print(f"demo: training on {args.hosts} hosts (containers algo-1..algo-{args.hosts}), {args.epochs} epochs",
          flush=True)
    spec = JobSpec(image=args.image, hosts=args.hosts,
                   hyperparameters={"sagemaker_program": "mnist", "epochs": str(args.epochs), "batch-size": "64"},
                   channels=[Channel("train", data / "train"), Channel("test", data / "test")], timeout_s=1200)
    result = run_job(spec, out / "job")

    for host in result.hosts:
        log = out / f"{host.name}.log"
        log.write_text(host.logs)
        for line in host.logs.splitlines():
            if "epoch=" in line or line.startswith("train: job") or "FAILED" in line:
                print(f"  {host.name} | {line}")
    print()
    print(f"demo: exit codes {', '.join(f'{h.name}={h.exit_code}' for h in result.hosts)} "
          f"after {result.seconds:.0f} s")
    print(f"demo: logs       {out}/algo-*.log")
    model_dir = result.master.root / "model"
    print(f"demo: model      {model_dir}: {', '.join(sorted(p.name for p in model_dir.iterdir()))}")
    print(f"demo: output     {result.master.root / 'output'} (TensorBoard events under tensorboard/)")
    metrics = model_dir / "metrics.json"
    if metrics.exists():
        accuracy = json.loads(metrics.read_text()).get("val_accuracy")
        print(f"demo: final validation accuracy {accuracy:.4f} over the whole synthetic test set (every rank's shard)")
    for host in result.hosts:
        if host.failure:
            print(f"demo: {host.name} failure: {host.failure}")
    ok = all(code == 0 for code in result.exit_codes) and not result.timed_out
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""GluonCV's --static-alloc and --clip-gradient in the built-in R-CNN programs: throughput and the first iterations'
losses, each configuration against the defaults, runs interleaved (A B C A B C ...) on a shared machine.

Run inside the image, with the source tree mounted (the programs run from it):

    docker run --rm -v "$PWD":/src:ro -w /src sagemaker-mxnet-horovod:cpu \
        python -m benchmarks.rcnn_gluoncv_options [--model mask] [--iterations 6] [--rounds 2] [--short 256]

Each run: one process (1 rank, OMP_NUM_THREADS=2, --num-workers 0), random weights (--pretrained-base false), no
validation, --iterations iterations of batch 1 on synthetic COCO (sagemaker_mxnet_data.synthetic_coco: 8 images of
200-320 px) at --short. Same seed and data in every run. Printed per configuration and round: the load average when
the run started, the first iteration's seconds (the graph is built in it), the median images/s of the others, and
each iteration's total loss; then per configuration the median over rounds.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATIONS = {
    "defaults": [],
    "--static-alloc true": ["--static-alloc", "true"],
    "--clip-gradient 1.5": ["--clip-gradient", "1.5"],
}
ITERATION = re.compile(r"^epoch=0 iter=(\d+) loss=(\S+) .* samples_per_sec=(\S+)$", re.M)


def run(model, data, workdir, extra, iterations, short):
    env = dict(os.environ, SM_CHANNEL_TRAIN=str(data), SM_CHANNELS='["train"]', OMP_NUM_THREADS="2",
               PYTHONPATH=os.pathsep.join([str(ROOT / "entrypoints"), str(ROOT / "container" / "src")]),
               SM_MODEL_DIR=str(workdir / "model"), SM_CHECKPOINT_DIR=str(workdir / "checkpoints"),
               SM_OUTPUT_DATA_DIR=str(workdir / "output"), PYTHONUNBUFFERED="1")
    argv = [sys.executable, str(ROOT / "entrypoints" / f"{model}_rcnn.py"), "--pretrained-base", "false",
            "--short", str(short), "--max-size", str(short * 5 // 4), "--num-workers", "0", "--epochs", "1",
            "--max-iterations-per-epoch", str(iterations), "--log-interval", "1", "--tensorboard", "false",
            "--resume", "false", "--save-interval", "0", *extra]
    load = os.getloadavg()
    start = time.time()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600, cwd=workdir)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    found = [(int(i), float(loss), float(rate)) for i, loss, rate in ITERATION.findall(out.stdout)]
    assert [i for i, _, _ in found] == list(range(1, iterations + 1)), out.stdout[-3000:]
    return {"load": load, "seconds": time.time() - start, "first_s": 1.0 / found[0][2],
            "rate": statistics.median(rate for _, _, rate in found[1:]), "losses": [loss for _, loss, _ in found]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["faster", "mask"], default="mask")
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--short", type=int, default=256)
    parser.add_argument("--configs", nargs="*", default=list(CONFIGURATIONS), choices=list(CONFIGURATIONS))
    args = parser.parse_args()
    from sagemaker_mxnet_data import synthetic_coco  # the image's (installed there)

    results = {name: [] for name in args.configs}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "coco"
        synthetic_coco.write_coco(data, num_train=8, num_val=0, image_size=(200, 320), seed=1)
        for round_index in range(args.rounds):
            for name in args.configs:
                workdir = Path(tmp) / f"{name.replace(' ', '_')}-{round_index}"
                workdir.mkdir()
                result = run(args.model, data, workdir, CONFIGURATIONS[name], args.iterations, args.short)
                results[name].append(result)
                print(f"round {round_index} {name}: load {result['load'][0]:.2f} {result['load'][1]:.2f} "
                      f"{result['load'][2]:.2f}, first iteration {result['first_s']:.1f} s, then "
                      f"{result['rate']:.4f} images/s, losses {' '.join(f'{v:.4f}' for v in result['losses'])}",
                      flush=True)
    print(f"\n{args.model}_rcnn, short {args.short}, {args.iterations} iterations, median over {args.rounds} rounds")
    print("| configuration | first iteration (s) | images/s (iterations 2..N) | loss at iterations 1..N |")
    print("| --- | --- | --- | --- |")
    for name, runs in results.items():
        losses = [statistics.median(r["losses"][i] for r in runs) for i in range(args.iterations)]
        print(f"| {name} | {statistics.median(r['first_s'] for r in runs):.1f} | "
              f"{statistics.median(r['rate'] for r in runs):.4f} | {' '.join(f'{v:.4f}' for v in losses)} |")


if __name__ == "__main__":
    main()

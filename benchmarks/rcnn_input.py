#!/usr/bin/env python3
"""The R-CNN input pipeline's throughput per CPU core, alone (no training), and what it takes to feed 8 GPUs.

    python3 -m benchmarks.rcnn_input --image sagemaker-mxnet-horovod:cpu [--images 48] [--workers 1 2]
        [--short 800] [--max-size 1333] [--gpu-images-per-s 6 12]

In one container of the image (all of this machine's cores), on COCO-like data (benchmarks/probes/rcnn_input_probe/
coco_like.py: COCO's image sizes, ~7 objects with polygons, ~140 KB JPEGs), for Faster and Mask R-CNN
(benchmarks/probes/rcnn_input_probe/measure.py, the programs' own dataset, transforms, batchify and DataLoader):
  stages   one process with one OpenMP thread, one image at a time: read + decode, training transform, batchify,
           ms per image: the figure per core
  loader   the program's DataLoader with W worker processes (the training process only receives the batches):
           images/s of this machine's cores, and seconds to the first batch
Then, per GPU instance type (vCPUs from AWS's instance table), the images/s 8 GPUs consume at --gpu-images-per-s
each (an assumption: this machine has no GPU), the per-core rate needed to deliver 1.5x that from the vCPUs left
after one per training rank, and the per-core rate measured here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common.machine import load

DOCKER = os.environ.get("DOCKER", "docker")
PROBE_DIR = Path(__file__).resolve().parent / "probes" / "rcnn_input_probe"
# vCPUs and GPUs per instance (AWS's instance table): both have 96 vCPUs (48 physical cores) and 8 GPUs.
INSTANCES = {"ml.p3dn.24xlarge (8 V100)": (96, 8), "ml.p4d.24xlarge (8 A100)": (96, 8)}
MARGIN = 1.5  # the pipeline must deliver this much more than the GPUs consume


def measure(image: str, data: Path, model: str, args, env: dict, extra: list) -> list[dict]:
    # measure.py imports the built-in programs from where the image installs them.
    argv = [DOCKER, "run", "--rm", "-v", f"{data}:/data:ro", "-v", f"{PROBE_DIR}:/bench:ro", "--shm-size", "2g",
            "-e", "PYTHONPATH=/opt/entrypoints",
            *[flag for key, value in env.items() for flag in ("-e", f"{key}={value}")],
            "--entrypoint", "python", image, "/bench/measure.py", "/data", "--model", model, "--images",
            str(args.images), "--short", str(args.short), "--max-size", str(args.max_size), *extra]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"benchmark: {model} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--images", type=int, default=48, help="images per measurement")
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2], help="DataLoader workers to measure")
    parser.add_argument("--short", type=int, default=800)
    parser.add_argument("--max-size", type=int, default=1333)
    parser.add_argument("--models", nargs="+", default=["faster", "mask"], choices=["faster", "mask"])
    parser.add_argument("--gpu-images-per-s", type=float, nargs=2, default=[6.0, 12.0], metavar=("LOW", "HIGH"),
                        help="images/s one GPU trains on (assumption; the issue's range for Mask R-CNN)")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))

    load_before = load()
    results = {}
    with tempfile.TemporaryDirectory(prefix="rcnn-input-") as tmp:
        data = Path(tmp) / "coco"
        made = subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp}:/out", "-v", f"{PROBE_DIR}:/bench:ro",
                               "--entrypoint", "python", args.image, "/bench/coco_like.py", "/out/coco", "--images",
                               str(args.images)], capture_output=True, text=True, check=True)
        stats = json.loads(made.stdout.strip().splitlines()[-1])
        for model in args.models:
            stages = measure(args.image, data, model, args, {"OMP_NUM_THREADS": "1"}, ["--stages"])[0]
            loaders = measure(args.image, data, model, args, {},
                              ["--workers", *[str(w) for w in args.workers]]) if args.workers else []
            results[model] = (stages, loaders)
            print(f"{model}: {json.dumps(stages['ms_per_image'])}; loader "
                  + ", ".join(f"{r['workers']} workers {r['images_per_s']:.2f}/s" for r in loaders)
                  + f" (load {load()})", flush=True)

    print(f"\nR-CNN training input pipeline in {args.image}, alone, on this machine's {cores} cores; {stats['images']} "
          f"COCO-like images ({stats['objects_per_image']:.1f} objects each, {stats['mean_jpeg_kb']:.0f} KB JPEGs), "
          f"short side {args.short}, max {args.max_size}, 1 image per device; load average before {load_before}, "
          f"after {load()}")
    print(f"\n{'one core, ms per image':24s} {'read + decode':>14s} {'transform':>10s} {'batchify':>9s} {'total':>7s} "
          f"{'images/s/core':>14s}")
    per_core = {}
    for model, (stages, _) in results.items():
        parts = stages["ms_per_image"]
        total = sum(parts.values())
        per_core[model] = 1000 / total
        print(f"{model + ' R-CNN':24s} {parts['read + decode']:14.1f} {parts['transform']:10.1f} "
              f"{parts['batchify']:9.1f} {total:7.1f} {per_core[model]:14.2f}")
    if args.workers:
        print(f"\n{'DataLoader (program)':24s}" + "".join(f"{f'{w} workers':>22s}" for w in args.workers))
        for model, (_, loaders) in results.items():
            cells = [f"{r['images_per_s']:.2f}/s, 1st {r['first_batch_s']:.1f} s" for r in loaders]
            print(f"{model + ' R-CNN':24s}" + "".join(f"{c:>22s}" for c in cells))

    low, high = args.gpu_images_per_s
    print(f"\nFeeding 8 GPUs at {low:g}-{high:g} images/s each (assumed), {MARGIN}x margin, one vCPU per rank kept for "
          "training:")
    print(f"{'instance':28s} {'GPUs consume':>13s} {'to deliver':>11s} {'loader vCPUs':>13s} {'needed/vCPU':>12s} "
          + "".join(f"{'have/core ' + m:>16s}" for m in per_core) + f"{'workers/rank':>13s}")
    for name, (vcpus, gpus) in INSTANCES.items():
        loader_vcpus = vcpus - gpus
        consume = (gpus * low, gpus * high)
        deliver = (MARGIN * consume[0], MARGIN * consume[1])
        needed = (deliver[0] / loader_vcpus, deliver[1] / loader_vcpus)
        workers = {m: math.ceil(MARGIN * high / rate) for m, rate in per_core.items()}
        print(f"{name:28s} {consume[0]:5.0f}-{consume[1]:<4.0f}/s {deliver[0]:5.0f}-{deliver[1]:<4.0f}/s "
              f"{loader_vcpus:13d} {needed[0]:5.2f}-{needed[1]:<5.2f}/s"
              + "".join(f"{rate:16.2f}" for rate in per_core.values())
              + f"{'/'.join(str(w) for w in workers.values()):>13s}")
    print("(workers/rank: worker processes one rank needs for its GPU at the high rate x 1.5, per model, "
          f"at the per-core rate measured here; a rank has {INSTANCES['ml.p4d.24xlarge (8 A100)'][0] // 8} vCPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

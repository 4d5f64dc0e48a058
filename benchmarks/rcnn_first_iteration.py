#!/usr/bin/env python3
"""The R-CNN programs' first training iteration against the steady ones, on CPU, configurations side by side.

    python3 -m benchmarks.rcnn_first_iteration --image sagemaker-mxnet-horovod:cpu [--models faster_rcnn mask_rcnn]
        [--iterations 6] [--repeat 1] [--configs ...] [--baseline-image OLD_IMAGE]

Each run is a 2-host job on this machine's containers (1 rank each, as `make demo` runs MNIST): the image's built-in
R-CNN program through benchmarks/probes/first_epoch_probe/first_iterations_rcnn.py, which only adds timestamps (the start's
phases; each iteration's wait for its batch and its training step). Data: COCO-like images
(benchmarks/probes/rcnn_input_probe/coco_like.py: COCO's sizes, ~7 objects with polygons), resized to --short 320 (CPU),
random weights, no validation, 1 epoch of --iterations iterations. Configurations (a user's value always wins, so
each is set as a user would):

  defaults                 the program's and the launcher's defaults (OMP_NUM_THREADS: the launcher's thread rule,
                           the machine's cores / the ranks of all the hosts sharing it, local_job writing SDK local
                           mode's instance type; before that rule, each container's cores)
  OMP_NUM_THREADS=1        set as a user would (on this 2-core machine, what the rule sets)
  ... 1 worker / 0 workers the same with --num-workers 1 / 0 (DataLoader worker processes per rank)
  baseline: ...            with --baseline-image, the same configuration on that image (the programs before a change)

Printed per configuration (median over rounds, rank 0): the first iteration (its batch wait + its step), the steady
iteration (median of iterations 3..N: batch wait + step), their ratio, and the start's phases.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common.machine import load
from benchmarks.common.probed_runs import PROBE_DIR, PROBE_ENV, phases, run_probed
from scripts.local_job import DOCKER, Channel, JobSpec

INPUT_PROBE_DIR = Path(__file__).resolve().parent / "probes" / "rcnn_input_probe"
CONFIGURATIONS = {  # name -> (environment, hyperparameters)
    "defaults": ({}, {}),
    "OMP_NUM_THREADS=1": ({"OMP_NUM_THREADS": "1"}, {}),
    "OMP_NUM_THREADS=1, 1 worker": ({"OMP_NUM_THREADS": "1"}, {"num-workers": "1"}),
    "OMP_NUM_THREADS=1, 0 workers": ({"OMP_NUM_THREADS": "1"}, {"num-workers": "0"}),
}
PHASES = ("python", "program imports", "read data", "import mxnet + gluoncv", "horovod init", "get_model + initialize",
          "first forward (256 px)", "build net", "datasets + transforms", "resume check", "broadcast",
          "to epoch 1 start")


def run(model: str, name: str, image: str, data: Path, workdir: Path, args) -> dict:
    env, extra = CONFIGURATIONS[name.removeprefix("baseline: ")]
    hps = {"sagemaker_program": "first_iterations_rcnn.py", "sagemaker_submit_directory": "/opt/ml/code",
           "probe-model": model, "pretrained-base": "false", "short": str(args.short), "max-size": str(args.short * 5 // 3),
           "epochs": "1", "max-iterations-per-epoch": str(args.iterations), "log-interval": "1", "lr-warmup": "0",
           "resume": "false", "tensorboard": "false", **extra}
    _, records, sampler = run_probed(
        lambda during: JobSpec(image=image, hosts=2, hyperparameters=hps, env={**env, **PROBE_ENV}, code_dir=PROBE_DIR, during=during,
                               channels=[Channel("train", data)], timeout_s=3600), workdir, f"{model} {name}")
    epoch = records[0]["epochs"][0]
    ends = [epoch["start"]] + [end for _, end in epoch["stepped"]]
    waits = [arrived - previous_end for arrived, previous_end in zip(epoch["arrived"], ends)]
    steps = [end - start for start, end in epoch["stepped"]]
    return {"waits": waits, "steps": steps, "records": records,
            "other_cpu": sampler.other_cpu_per_second(epoch["start"], epoch["end"])}


def summary(result: dict) -> dict:
    totals = [w + s for w, s in zip(result["waits"], result["steps"])]
    steady = statistics.median(totals[2:])
    return {"first wait": result["waits"][0], "first step": result["steps"][0], "first": totals[0],
            "steady wait": statistics.median(result["waits"][2:]), "steady step": statistics.median(result["steps"][2:]),
            "steady": steady, "ratio": totals[0] / steady, "second": totals[1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--baseline-image", help="also run each configuration on this image")
    parser.add_argument("--models", nargs="+", default=["faster_rcnn", "mask_rcnn"],
                        choices=["faster_rcnn", "mask_rcnn"])
    parser.add_argument("--iterations", type=int, default=6, help="iterations per run (3..N make the steady figure)")
    parser.add_argument("--short", type=int, default=320, help="image short side (the long side is capped at 5/3 of it)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; configurations alternate within each")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGURATIONS), choices=list(CONFIGURATIONS))
    parser.add_argument("--json", type=Path, help="also write every run's records to this file")
    args = parser.parse_args()
    if args.iterations < 4:
        parser.error("--iterations must be at least 4 (iterations 3..N are the steady ones)")

    names = list(args.configs) + ([f"baseline: {n}" for n in args.configs] if args.baseline_image else [])
    runs: dict = {}
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="rcnn-first-") as tmp:
        tmp = Path(tmp)
        subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp}:/data", "-v", f"{INPUT_PROBE_DIR}:/bench:ro",
                        "--entrypoint", "python", args.image, "/bench/coco_like.py", "/data/coco", "--images",
                        str(2 * args.iterations)], check=True, stdout=subprocess.DEVNULL)
        for round_ in range(args.repeat):
            for model in args.models:
                for index, name in enumerate(names):
                    image = args.baseline_image if name.startswith("baseline: ") else args.image
                    before = load()
                    result = run(model, name, image, tmp / "coco", tmp / f"run-{round_}-{model}-{index}", args)
                    runs.setdefault((model, name), []).append(result)
                    figures = summary(result)
                    print(f"round {round_ + 1} {model} {name:34s} first {figures['first']:.1f} s (batch wait "
                          f"{figures['first wait']:.1f} + step {figures['first step']:.1f}), steady "
                          f"{figures['steady']:.1f} s, ratio {figures['ratio']:.2f}; iterations "
                          f"{' '.join(f'{w + s:.1f}' for w, s in zip(result['waits'], result['steps']))}; other "
                          f"processes {result['other_cpu'] or 0:.2f} CPU-s/s (load before {before}, after {load()})",
                          flush=True)

    print(f"\nR-CNN first iteration vs steady, CPU, 2 hosts x 1 rank on this machine's cores, short side {args.short}, "
          f"{args.iterations} iterations x {args.repeat} rounds, image {args.image}; load average before {load_before}, "
          f"after {load()}")
    print(f"{'model':12s} {'configuration':34s} {'first s (wait + step)':>24s} {'steady s (wait + step)':>24s} "
          f"{'first/steady':>13s}")
    for (model, name), results in runs.items():
        figures = [summary(r) for r in results]

        def med(key, figures=figures):
            return statistics.median(f[key] for f in figures)

        print(f"{model:12s} {name:34s} {med('first'):7.1f} ({med('first wait'):5.1f} + {med('first step'):5.1f}) "
              f"{med('steady'):10.1f} ({med('steady wait'):5.1f} + {med('steady step'):5.1f}) {med('ratio'):13.2f}")
    print("\nThe start's phases on rank 0, seconds (median of rounds):")
    keys = list(runs)
    print(f"{'phase':24s}" + "".join(f"{(m[:4] + ' ' + n)[:26]:>28s}" for m, n in keys))
    for phase in PHASES:
        cells = [statistics.median(phases(r["records"][0]).get(phase, 0.0) for r in runs[key]) for key in keys]
        print(f"{phase:24s}" + "".join(f"{c:28.2f}" for c in cells))
    if args.json:
        args.json.write_text(json.dumps({f"{m} | {n}": rs for (m, n), rs in runs.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

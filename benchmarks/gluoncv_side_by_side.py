#!/usr/bin/env python3
"""GluonCV's own train_faster_rcnn.py and train_mask_rcnn.py beside the built-in programs, on the same data from
the same weights: the first iterations' loss terms, the validation mAP of the same weights, images/s.

    python3 -m benchmarks.gluoncv_side_by_side --gluoncv GLUONCV_CHECKOUT [--image sagemaker-mxnet-horovod:cpu]
        [--models faster mask] [--iterations 4] [--short 256] [--max-size 320] [--train 8] [--val 8]
        [--speed-iterations 6] [--speed-short 800] [--speed-max-size 1333] [--no-explain]
        [--ours-variant NAME:ARGS ...] [--omp-threads N] [--ours-omp-threads N] [--speed-rounds R] [--workdir DIR]

GLUONCV_CHECKOUT is a git checkout of dmlc/gluon-cv (its scripts are not in the wheel; the page names the commit
compared): mounted read-only, never edited. Every run is one `docker run` of the image, one process (one rank, the
container's CPUs), driven by benchmarks/probes/side_by_side_probe/runner.py, whose docstring lists the runtime
patches (no random flip, the same seeds at the first image, the same batch order, no backbone download). The data:
synth-data's COCO plus crowd objects and boxes at the image edge (edge_objects.py); the weights: one params file per
model, loaded by GluonCV's `--resume` and the program's `finetune-from`. Per model:
  loss   --iterations iterations at --short/--max-size with each side's defaults (batch 1, lr 0.00125 per image,
         warmup 1000 from 1/3, wd 1e-4, momentum 0.9), loader in-process: the loss terms side by side; then
         GluonCV again with SBS_EXPLAIN (what the programs do differently: Faster `crowd,inline`, Mask
         `inline`), unless --no-explain
  val    one iteration without the optimizer step, then each side's validation of the weights of
         detector-<model>.params (the initial ones with class biases that make every RoI a detection of the val
         set's classes: random weights detect nothing above the score thresholds): COCOeval's 12 stats, bbox (and
         segm), full precision; Mask again with GluonCV's box clipping off (`no-clip`)
  speed  --speed-iterations iterations at --speed-short (the defaults: 800, 1333), each side's default loader
         workers: training images/s over iterations 2..N, peak RSS; validation images/s from the val runs;
         --ours-variant: the programs again with other arguments, against the same GluonCV run
--iterations 0 runs the speed runs alone; --omp-threads sets OMP_NUM_THREADS on both sides (as `train` does for a
rank: its cores; unset, MXNet takes half the cores), --ours-omp-threads on the programs' side only (the programs as
`train` runs them beside the scripts as a user runs them); --speed-rounds repeats the speed runs (ours, GluonCV's,
the variants), one table row each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.common.machine import load

DOCKER = os.environ.get("DOCKER", "docker")
ROOT = Path(__file__).resolve().parents[1]
RUNNER = "/src/benchmarks/probes/side_by_side_probe/runner.py"
SCRIPTS = {"faster": "scripts/detection/faster_rcnn/train_faster_rcnn.py",
           "mask": "scripts/instance/mask_rcnn/train_mask_rcnn.py"}
TERMS = {"faster": ["rpn_cls", "rpn_box", "rcnn_cls", "rcnn_box"],
         "mask": ["rpn_cls", "rpn_box", "rcnn_cls", "rcnn_box", "mask"]}
EXPLAIN = {"faster": "crowd,inline", "mask": "inline"}
VAL_EXPLAIN = {"faster": "", "mask": "no-clip"}
STATS = ["AP", "AP50", "AP75", "AP_small", "AP_medium", "AP_large", "AR1", "AR10", "AR100", "AR_small",
         "AR_medium", "AR_large"]


# ---- reading a run's record (JSON lines written by the runner)

def read_record(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def iteration_losses(records: list[dict]) -> list[list[float]]:
    return [r["losses"] for r in records if r["event"] == "iteration"]


def train_rate(records: list[dict], batch: int = 1) -> float | None:
    """Images/s over iterations 2..N: (N - 1) batches between the first iteration's end and the last's (the first
    builds the graphs)."""
    times = [r["t"] for r in records if r["event"] == "iteration"]
    if len(times) < 2:
        return None
    return (len(times) - 1) * batch / (times[-1] - times[0])


def val_rate(records: list[dict]) -> float | None:
    """Validation images/s: the images scored over the time from the last training iteration to scoring's start
    (the inference pass; COCOeval itself excluded)."""
    last = [r["t"] for r in records if r["event"] == "iteration"]
    scoring = [r for r in records if r["event"] == "scoring"]
    if not last or not scoring:
        return None
    return scoring[0]["images"] / (scoring[0]["t"] - last[-1])


def stats(records: list[dict]) -> dict[str, list[float]]:
    """COCOeval's 12 stats per IoU type (bbox, segm), the first summary of each."""
    found = {}
    for r in records:
        if r["event"] == "stats":
            found.setdefault(r["iou_type"], r["stats"])
    return found


def peak_rss_mb(records: list[dict]) -> float | None:
    return next((r["max_rss_mb"] for r in records if r["event"] == "exit"), None)


def train_images(records: list[dict]) -> int | None:
    return next((r["count"] for r in records if r["event"] == "train_images"), None)


# ---- comparing

def loss_rows(names: list[str], ours: list[list[float]], theirs: list[list[float]], tolerance: float = 1e-5):
    """One row per iteration and term: (iteration from 1, term, ours, GluonCV's, difference, equal within the
    relative tolerance)."""
    rows = []
    for i, (a, b) in enumerate(zip(ours, theirs), start=1):
        for name, x, y in zip(names, a, b):
            rows.append((i, name, x, y, x - y, abs(x - y) <= tolerance * max(abs(x), abs(y), 1e-12)))
    return rows


def first_difference(rows) -> int | None:
    """The first iteration with a term that is not equal, or None."""
    return next((row[0] for row in rows if not row[5]), None)


def stats_rows(ours: dict[str, list[float]], theirs: dict[str, list[float]]):
    """(IoU type, stat name, ours, GluonCV's, equal to three decimals, equal exactly)."""
    rows = []
    for iou_type in sorted(set(ours) | set(theirs)):
        a, b = ours.get(iou_type, []), theirs.get(iou_type, [])
        for name, x, y in zip(STATS, a, b):
            rows.append((iou_type, name, x, y, f"{x:.3f}" == f"{y:.3f}", x == y))
    return rows


def ratio(ours: float | None, theirs: float | None) -> float | None:
    return ours / theirs if ours and theirs else None


# ---- running

class Runs:
    def __init__(self, args, work: Path):
        self.args, self.work = args, work
        (work / "runs").mkdir(parents=True, exist_ok=True)

    def docker(self, argv: list[str], env: dict, name: str) -> list[dict]:
        mounts = ["-v", f"{ROOT}:/src:ro", "-v", f"{self.args.gluoncv}:/gluoncv:ro", "-v", f"{self.work}:/work"]
        env = dict(env, PYTHONPATH="/src/entrypoints:/src/container/src", PYTHONUNBUFFERED="1")
        threads = self.args.omp_threads or (self.args.ours_omp_threads if argv[0] == "ours" else None)
        if threads:
            env["OMP_NUM_THREADS"] = str(threads)
        env_args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
        record = self.work / "runs" / f"{name}.jsonl"
        record.unlink(missing_ok=True)  # the runner appends
        if argv[0] != "prepare":
            argv = [*argv[:2], f"/work/runs/{name}.jsonl", *argv[2:]]
        # Loader worker processes pass batches through /dev/shm: Docker's 64 MB default is a bus error at short 800
        # (SageMaker's hosts give it half the memory).
        command = [DOCKER, "run", "--rm", "--shm-size", "4g", *mounts, *env_args, "-w", "/work/runs", self.args.image, "python",
                   RUNNER, *argv]
        start, before = time.time(), load()
        out = subprocess.run(command, capture_output=True, text=True, timeout=7200)
        (self.work / "runs" / f"{name}.log").write_text(out.stdout + out.stderr)
        if out.returncode != 0:
            raise SystemExit(f"{name} failed ({out.returncode}):\n{(out.stdout + out.stderr)[-4000:]}")
        print(f"  {name}: {time.time() - start:.0f} s, load {before}", flush=True)
        return read_record(record.read_text()) if record.exists() else []

    def gluoncv(self, model, name, steps, short, max_size, workers, validate, explain="", no_step=False, reseed="",
                weights="init"):
        env = {"HOME": "/work/home", "SBS_STEPS": str(steps), "SBS_EXPLAIN": explain, "SBS_RESEED": reseed}
        if short:
            env.update(SBS_SHORT=str(short), SBS_MAX_SIZE=str(max_size))
        if no_step:
            env["SBS_NO_STEP"] = "1"
        argv = ["gluoncv", model, f"/gluoncv/{SCRIPTS[model]}", "--dataset", "coco", "--gpus=", "--kv-store",
                "local", "--epochs", "1", "--resume", f"/work/{weights}-{model}.params", "--log-interval", "1",
                "--val-interval", "1" if validate else "2", "--save-prefix", f"/work/runs/{name}-",
                "--save-interval", "0"] + ([] if workers is None else ["-j", str(workers)])
        if model == "mask":
            argv += ["--batch-size", "1"]  # its default is 8 (a global batch over 8 GPUs); Faster's is 1
        return self.docker(argv, env, name)

    def ours(self, model, name, steps, short, max_size, workers, validate, no_step=False, extra=(), reseed="",
             weights="init"):
        data = "/work/coco" if validate else "/work/coco-train"
        env = {"SBS_RESEED": reseed, "SM_CHANNEL_TRAIN": data, "SM_CHANNELS": '["train"]', "SM_MODEL_DIR": f"/work/runs/{name}/model",
               "SM_CHECKPOINT_DIR": f"/work/runs/{name}/checkpoints", "SM_OUTPUT_DATA_DIR": f"/work/runs/{name}/out"}
        if no_step:
            env["SBS_NO_STEP"] = "1"
        argv = ["ours", model, "--finetune-from", f"/work/{weights}-{model}.params", "--epochs", "1",
                "--max-iterations-per-epoch", str(steps), "--log-interval", "1", "--tensorboard", "false",
                "--resume", "false", "--save-interval", "0"]
        argv += ["--short", str(short), "--max-size", str(max_size)] if short else []
        argv += ([] if workers is None else ["--num-workers", str(workers)]) + list(extra)
        return self.docker(argv, env, name)


# ---- the report

def print_losses(model, label, ours, theirs):
    rows = loss_rows(TERMS[model], iteration_losses(ours), iteration_losses(theirs))
    first = first_difference(rows)
    print(f"\n{model}: loss terms, ours against GluonCV's {label} (train images: ours {train_images(ours)}, "
          f"GluonCV {train_images(theirs)}); " + ("all equal (relative 1e-5)" if first is None and rows else
                                                  f"first difference at iteration {first}"))
    print("| iteration | term | ours | GluonCV | ours - GluonCV | equal |\n| --- | --- | --- | --- | --- | --- |")
    for i, name, x, y, d, equal in rows:
        print(f"| {i} | {name} | {x:.6f} | {y:.6f} | {d:+.2e} | {'yes' if equal else 'no'} |")


def print_stats(model, label, ours, theirs):
    rows = stats_rows(stats(ours), stats(theirs))
    print(f"\n{model}: validation of the same weights, ours against GluonCV's {label}")
    print("| type | stat | ours | GluonCV | equal to 3 decimals | equal |\n| --- | --- | --- | --- | --- | --- |")
    for iou_type, name, x, y, three, exact in rows:
        print(f"| {iou_type} | {name} | {x:.6f} | {y:.6f} | {'yes' if three else 'NO'} | {'yes' if exact else 'no'} |")


def fmt(value):
    return "-" if value is None else f"{value:.4f}"


def compare_model(runs, args, model):
    """One model's loss, validation and speed runs; prints the first two, returns the speed runs by label."""
    n, s, m = args.iterations, args.short, args.max_size
    if not n:
        return speed_runs(runs, args, model, {})
    ours = runs.ours(model, f"ours-{model}-loss", n, s, m, 0, False)
    theirs = runs.gluoncv(model, f"gluoncv-{model}-loss", n, s, m, 0, False)
    print_losses(model, "script", ours, theirs)
    if EXPLAIN[model] and not args.no_explain:
        explained = runs.gluoncv(model, f"gluoncv-{model}-loss-explained", n, s, m, 0, False, EXPLAIN[model])
        print_losses(model, f"script with SBS_EXPLAIN={EXPLAIN[model]}", ours, explained)
    ours_val = runs.ours(model, f"ours-{model}-val", 1, s, m, 0, True, no_step=True, weights="detector")
    theirs_val = runs.gluoncv(model, f"gluoncv-{model}-val", 1, s, m, 0, True, no_step=True, weights="detector")
    print_stats(model, "script", ours_val, theirs_val)
    if VAL_EXPLAIN[model] and not args.no_explain:
        explained = runs.gluoncv(model, f"gluoncv-{model}-val-explained", 1, s, m, 0, True,
                                 VAL_EXPLAIN[model], no_step=True, weights="detector")
        print_stats(model, f"script with SBS_EXPLAIN={VAL_EXPLAIN[model]}", ours_val, explained)
    return speed_runs(runs, args, model, {f"validation, short {s}": (ours_val, theirs_val, val_rate)})


def speed_runs(runs, args, model, speed):
    """The training speed runs (--speed-iterations), --speed-rounds times, added to `speed`, by label."""
    k, s, m = args.speed_iterations, args.speed_short, args.speed_max_size
    for i in range(args.speed_rounds if k else 0):
        suffix, label = (f"-{i + 1}", f", round {i + 1}") if args.speed_rounds > 1 else ("", "")
        defaults = f"training, short {s}, defaults{label}"
        speed[defaults] = (runs.ours(model, f"ours-{model}-speed{suffix}", k, s, m, None, False),
                           runs.gluoncv(model, f"gluoncv-{model}-speed{suffix}", k, s, m, None, False), train_rate)
        for variant in args.ours_variant:
            name, _, extra = variant.partition(":")
            speed[f"training, short {s}, ours {name} ({extra}){label}"] = (
                runs.ours(model, f"ours-{model}-speed-{name}{suffix}", k, s, m, None, False, extra=extra.split()),
                speed[defaults][1], train_rate)
    return speed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gluoncv", type=Path, required=True, help="a git checkout of dmlc/gluon-cv")
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--models", nargs="+", choices=["faster", "mask"], default=["faster", "mask"])
    parser.add_argument("--iterations", type=int, default=4, help="0: no loss and validation runs")
    parser.add_argument("--short", type=int, default=256)
    parser.add_argument("--max-size", type=int, default=320)
    parser.add_argument("--train", type=int, default=8, help="train images (with one crowd-only image)")
    parser.add_argument("--val", type=int, default=8)
    parser.add_argument("--speed-iterations", type=int, default=6, help="0: no speed runs")
    parser.add_argument("--speed-short", type=int, default=800)
    parser.add_argument("--speed-max-size", type=int, default=1333)
    parser.add_argument("--no-explain", action="store_true", help="no runs with SBS_EXPLAIN")
    parser.add_argument("--ours-variant", action="append", default=[], metavar="NAME:ARGS",
                        help="a further speed run of the programs with these arguments, e.g. "
                             "'static-alloc:--static-alloc true' (repeatable)")
    parser.add_argument("--omp-threads", type=int, help="OMP_NUM_THREADS for both sides (as the launcher sets it: "
                        "the cores per rank) [MXNet's default: half the cores]")
    parser.add_argument("--ours-omp-threads", type=int, help="OMP_NUM_THREADS for the programs' runs only (as "
                        "`train` sets it for a rank: its cores; GluonCV's scripts keep MXNet's default)")
    parser.add_argument("--speed-rounds", type=int, default=1, help="the speed runs, this many times")
    parser.add_argument("--workdir", type=Path, help="keep the data, records and logs here [a temporary dir]")
    args = parser.parse_args()
    args.gluoncv = args.gluoncv.resolve()
    for script in SCRIPTS.values():
        if not (args.gluoncv / script).is_file():
            raise SystemExit(f"{args.gluoncv} has no {script}: pass a checkout of dmlc/gluon-cv")
    commit = subprocess.run(["git", "-C", str(args.gluoncv), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    with tempfile.TemporaryDirectory() as tmp:
        work = (args.workdir or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        runs = Runs(args, work)
        print(f"GluonCV checkout {args.gluoncv} at {commit}; image {args.image}; work dir {work}; load {load()}")
        runs.docker(["prepare", "/work", "--train", str(args.train), "--val", str(args.val)], {}, "prepare")
        speeds = {model: compare_model(runs, args, model) for model in args.models}
        print("\n| model | what | ours images/s | GluonCV images/s | ours / GluonCV | peak RSS MB, ours / GluonCV |")
        print("| --- | --- | --- | --- | --- | --- |")
        for model, speed in speeds.items():
            for what, (ours, theirs, rate) in speed.items():
                a, b = rate(ours), rate(theirs)
                r = ratio(a, b)
                print(f"| {model} | {what} | {fmt(a)} | {fmt(b)} | {'-' if r is None else f'{r:.2f}x'} | "
                      f"{fmt(peak_rss_mb(ours))} / {fmt(peak_rss_mb(theirs))} |")
        print(f"load at the end {load()}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Seconds per training iteration of the R-CNN entrypoints on one host: 1 rank vs 2 ranks, the launcher's
MPI defaults vs plain mpirun, and peak RSS per rank.

A script, not a test (minutes of CPU). Run it with the dev venv on an otherwise idle machine::

    PYTHONPATH=container/src /opt/devvenv/bin/python -m benchmarks.rcnn_iteration [--models faster,mask] [--iterations 3] [--short 320]

Configurations (all with per-device batch 1, --num-workers 0, --pretrained-base false, no validation):
  1 rank, launcher   mpirun -np 1 -bind-to none -map-by slot, OMP_NUM_THREADS=cores
  1 rank, plain      mpirun -np 1 (OpenMPI's default binding, OMP_NUM_THREADS unset)
  2 ranks, launcher  mpirun -np 2 -bind-to none -map-by slot -mca mpi_yield_when_idle 1,
                     OMP_NUM_THREADS=cores/2 (what the launcher plans when ranks have < 2 cores each)
  2 ranks, plain     mpirun -np 2 (busy-polling MPI progress, OMP_NUM_THREADS unset: every rank
                     starts one OpenMP thread per core)

s/iter is the mean over iterations 2..N (iteration 1 builds the graph); images/s = global batch / s/iter.
Peak RSS is the largest VmHWM of any rank (sampled from /proc every 0.5 s; VmHWM is itself a high-water
mark, so only the last half second before exit can be missed). Synthetic data: 16 train images with
sides 320-400 px (resized to --short).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from sagemaker_mxnet_data import synthetic_coco  # container/src on PYTHONPATH (the docstring's command)

ROOT = Path(__file__).resolve().parents[1]

SCRIPTS = {"faster": ROOT / "entrypoints" / "faster_rcnn.py", "mask": ROOT / "entrypoints" / "mask_rcnn.py"}
ITER_LINE = re.compile(r"^epoch=\d+ iter=(\d+) .* samples_per_sec=(\S+)$")
RSS_TARGET_GB = 3.0


def configs(cores):
    base = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
    launcher = ["-bind-to", "none", "-map-by", "slot"]
    return [
        ("1 rank, launcher", 1, [*base, "-np", "1", *launcher, "-x", f"OMP_NUM_THREADS={cores}"]),
        ("1 rank, plain", 1, [*base, "-np", "1"]),
        ("2 ranks, launcher", 2, [*base, "-np", "2", *launcher, "-mca", "mpi_yield_when_idle", "1",
                                  "-x", f"OMP_NUM_THREADS={max(1, cores // 2)}"]),
        ("2 ranks, plain", 2, [*base, "-np", "2"]),
    ]


class RssSampler:
    """Max VmHWM (bytes) per process whose command line contains `marker`."""

    def __init__(self, marker):
        self.marker, self.peaks, self._stop = marker, {}, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
                    if self.marker not in cmdline or "mpirun" in cmdline.split(" ", 1)[0]:
                        continue
                    with open(f"/proc/{pid}/status") as f:
                        for line in f:
                            if line.startswith("VmHWM:"):
                                kb = int(line.split()[1])
                                self.peaks[pid] = max(self.peaks.get(pid, 0), kb * 1024)
                except (OSError, ValueError):
                    continue
            self._stop.wait(0.5)

    def stop(self):
        self._stop.set()
        self._thread.join(5)
        return self.peaks


def run_one(model, name, ranks, prefix, data_dir, args, workdir):
    ckpt = Path(tempfile.mkdtemp(prefix="ckpt-", dir=workdir))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SM_", "OMPI_", "PMI_", "HOROVOD_", "OMP_NUM_THREADS"))}
    env.update(PYTHONUNBUFFERED="1", SM_MODEL_DIR=str(ckpt / "model"), SM_OUTPUT_DATA_DIR=str(ckpt / "out"),
               MXNET_HOME=str(ckpt / "mxnet-home"))
    argv = [*prefix, "-x", "PYTHONUNBUFFERED", "-x", "MXNET_HOME", sys.executable, str(SCRIPTS[model]),
            "--train-dir", str(data_dir), "--checkpoint-dir", str(ckpt), "--model-dir", str(ckpt / "model"),
            "--output-data-dir", str(ckpt / "out"), "--tensorboard", "false", "--pretrained-base", "false",
            "--num-workers", "0", "--epochs", "1", "--max-iterations-per-epoch", str(args.iterations),
            "--log-interval", "1", "--lr-warmup", "0", "--short", str(args.short), "--resume", "false"]
    sampler = RssSampler(str(ckpt))
    start = time.time()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout, check=False)
    wall = time.time() - start
    peaks = sampler.stop()
    shutil.rmtree(ckpt, ignore_errors=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        return {"model": model, "config": name, "ranks": ranks, "error": f"exit {proc.returncode}: {tail}"}
    rates = {int(m.group(1)): float(m.group(2)) for m in map(ITER_LINE.match, proc.stdout.splitlines()) if m}
    measured = [ranks / rates[i] for i in sorted(rates) if i >= 2 and rates[i] > 0]
    s_per_iter = sum(measured) / len(measured) if measured else None
    return {"model": model, "config": name, "ranks": ranks, "s_per_iter": s_per_iter,
            "first_iter_s": ranks / rates[1] if rates.get(1) else None,
            "images_per_sec": ranks / s_per_iter if s_per_iter else None,
            "peak_rss_gb_per_rank": max(peaks.values()) / 2**30 if peaks else None,
            "rank_processes_seen": len(peaks), "wall_s": wall}


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="faster,mask", help="comma list of faster, mask")
    parser.add_argument("--iterations", type=int, default=3, help="iterations per run (the first is not timed)")
    parser.add_argument("--short", type=int, default=320, help="image short side")
    parser.add_argument("--configs", default="", help="comma list of config numbers 1-4 (default: all)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    parser.add_argument("--json", default="", help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    if args.iterations < 2:
        parser.error("--iterations must be at least 2 (the first one is not timed)")
    cores = len(os.sched_getaffinity(0))
    chosen = configs(cores)
    if args.configs:
        chosen = [chosen[int(i) - 1] for i in args.configs.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="rcnn-bench-"))
    try:
        data = workdir / "coco"
        synthetic_coco.write_coco(data, num_train=16, num_val=0, image_size=(args.short, args.short * 5 // 4),
                                  seed=0)
        results = []
        for model in args.models.split(","):
            for name, ranks, prefix in chosen:
                print(f"running {model} R-CNN, {name} ...", file=sys.stderr, flush=True)
                results.append(run_one(model, name, ranks, prefix, data, args, workdir))
                print(f"  {results[-1]}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"\nR-CNN ResNet-50 training iteration, CPU, {cores} cores, short side {args.short}, batch 1 per rank, "
          f"{args.iterations - 1} timed iteration(s) per run\n")
    header = f"{'model':<12} {'configuration':<18} {'s/iter':>8} {'images/s':>9} {'1st iter s':>10} " \
             f"{'peak RSS/rank':>13} {'<= 3 GB':>8}"
    print(header)
    print("-" * len(header))
    for r in results:
        label = "Faster R-CNN" if r["model"] == "faster" else "Mask R-CNN"
        if "error" in r:
            print(f"{label:<12} {r['config']:<18} failed: {r['error']}")
            continue
        rss = r["peak_rss_gb_per_rank"]
        ok = "-" if rss is None else ("yes" if rss <= RSS_TARGET_GB else "NO")
        print(f"{label:<12} {r['config']:<18} {fmt(r['s_per_iter'], '8.2f')} {fmt(r['images_per_sec'], '9.3f')} "
              f"{fmt(r['first_iter_s'], '10.2f')} {fmt(rss, '10.2f') + ' GB':>13} {ok:>8}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())

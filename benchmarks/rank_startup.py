#!/usr/bin/env python3
"""A rank's start and exit, side by side in two images: `import mxnet, horovod.mxnet`, wall and CPU, and the
CPU of the exit after the program's last line (Python finalization and MXNet's destructors).

In each image one container runs the probe RUNS times, one process after another, as a rank does: import
the stack, one small MXNet operation, last line. Import wall and CPU are the process's own clocks (CPU from the
process's start: interpreter start included); exit CPU is the process's whole CPU (the parent's rusage of the
child) minus its CPU at the last line; exit wall is the last line to the parent's wait returning. Images
alternate round by round, so a change in the machine's load hits both. Prints medians and old/new ratios.

  python3 -m benchmarks.rank_startup --old sagemaker-mxnet-horovod:cpu --new smh-startup:cpu [--runs 5]
      [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from benchmarks.common.machine import load

DOCKER = os.environ.get("DOCKER", "docker")

# The rank: its import and its exit. Prints its clocks at its last line.
PROBE = """
import time
wall0, cpu0 = time.perf_counter(), time.process_time()
import sys
import mxnet as mx
import horovod.mxnet as hvd
imported_wall, imported_cpu = time.perf_counter() - wall0, time.process_time()
mx.nd.ones((4,)).asnumpy()
print(repr((imported_wall, imported_cpu, len(sys.modules), time.process_time(), time.time())), flush=True)
"""

# Runs in the image: the probe RUNS times, one after another; one JSON line per run.
DRIVER = """
import ast, json, resource, subprocess, sys, time
for _ in range(int(sys.argv[1])):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", sys.argv[2]], capture_output=True, text=True, check=True).stdout
    exited = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, cpu, modules, cpu_at_end, last_line = ast.literal_eval(out.strip().splitlines()[-1])
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(json.dumps({"import_wall": wall, "import_cpu": cpu, "modules": modules,
                      "exit_cpu": total - cpu_at_end, "exit_wall": exited - last_line, "total_cpu": total}))
"""

METRICS = ("import_wall", "import_cpu", "exit_cpu", "exit_wall", "total_cpu", "modules")


def run(image: str, runs: int) -> list[dict]:
    argv = [DOCKER, "run", "--rm", "--entrypoint", "python", image, "-c", DRIVER, str(runs), PROBE]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{image}: probe failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--new", required=True)
    parser.add_argument("--runs", type=int, default=5, help="processes per container")
    parser.add_argument("--rounds", type=int, default=2, help="containers per image, alternating")
    args = parser.parse_args()

    samples: dict = {args.old: [], args.new: []}
    print(f"load average before: {load()} (1/5/15 min); {os.cpu_count()} cores", flush=True)
    for round_ in range(args.rounds):
        for image in (args.old, args.new):
            samples[image] += run(image, args.runs)
            print(f"round {round_ + 1} {image}: done (load {load()})", flush=True)
    print()
    print(f"{'median of ' + str(args.rounds * args.runs) + ' processes':28s} {args.old:>28s} {args.new:>28s} "
          f"{'old / new':>10s}")
    for metric in METRICS:
        old, new = (statistics.median(s[metric] for s in samples[image]) for image in (args.old, args.new))
        unit = "" if metric == "modules" else " s"
        print(f"{metric:28s} {old:26.3f}{unit:2s} {new:26.3f}{unit:2s} {old / new:9.2f}x")
    print(f"\nload average after: {load()} (1/5/15 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

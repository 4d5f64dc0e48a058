#!/usr/bin/env python3
"""Launcher overhead at 2, 4, 8 and 16 hosts: this image's `train` vs the sagemaker-training toolkit.

Each job is N containers (one per host, nothing pinned: they share the machine's cores) running
tests/integration/code/allreduce.py (one allreduce per rank, one rank per host). Overhead = first container
start to last container exit, by docker's clock, minus the program's own time (first rank start to last rank
end, as the ranks record them), as in benchmarks/launcher_overhead.py. Counts alternate within each round, so
a change in the machine's load hits every count. Every run prints the load average it ran under.

Prints, per host count: median overhead of each launcher, the ratio, overhead per host, growth relative to the
smallest count (linear growth would equal the host ratio), and this launcher's overhead by phase.

--start-gate: every container's command waits at a gate until all the job's containers run, then all start at
once, and the overhead counts from that moment. The one Docker daemon of this machine starts a job's containers
one after another, ~0.1 s apart even when they only sleep (container_start_spread.py): without the gate that
wait is in the overhead, which is what a launcher adds once every host is up only with it.

  python3 -m benchmarks.launcher_scale [--image sagemaker-mxnet-horovod:cpu [OTHER_IMAGE ...]]
      [--hosts 2 4 8 16] [--toolkit-hosts 2 4 8] [--repeat 2]

With several images (before and after a change), they alternate within each round, job by job.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.common import charts
from benchmarks.common.launcher_phases import PHASES, phases, program_seconds
from benchmarks.common.machine import load
from scripts.local_job import JobSpec, run_job
from scripts.local_job.toolkit import as_toolkit_job, make_ssh_dir

ROOT = Path(__file__).resolve().parents[1]

CODE = ROOT / "tests" / "integration" / "code"


def run_once(image: str, launcher: str, hosts: int, workdir: Path, ssh_dir: Path, start_gate: bool):
    """(overhead, program seconds, phases or None, container starts) of one successful job; raises otherwise.
    Overhead: from the first container's start (or the gate) to the last one's exit, minus the program's time."""
    hps = {"sagemaker_program": "allreduce.py", "sagemaker_submit_directory": "/opt/ml/code"}
    spec = JobSpec(image=image, hosts=hosts, hyperparameters=hps, code_dir=CODE, hostname_is_alias=True,
                   timeout_s=900, timed_logs=True, start_gate=start_gate)
    if launcher == "toolkit":
        spec = as_toolkit_job(spec, ssh_dir)
    result = run_job(spec, workdir)
    if result.timed_out or any(code != 0 for code in result.exit_codes):
        raise RuntimeError(f"{launcher} job on {hosts} hosts failed:\n" + result.describe()[-6000:])
    program = program_seconds(result, ranks=hosts)
    return result.container_seconds - program, program, phases(result) if launcher == "ours" else None, starts(result)


def starts(result) -> tuple[float, float]:
    """How docker started the containers (all asked for at once): (first start -> the master's start, first
    start -> last start), by docker's clock. The first phase below includes the former."""
    started = [h.started_at for h in result.hosts]
    return result.master.started_at - min(started), max(started) - min(started)


def cells(values) -> str:
    return "".join(f"{v:7.2f}" if v is not None else f"{'-':>7s}" for v in values)


def summary(image: str, hosts_list: list, overhead: dict, breakdown: dict, start_spread: dict) -> None:
    """One image's tables: this launcher's phases, then both launchers' overhead by host count."""
    def median(launcher, hosts):
        runs = overhead.get((image, launcher, hosts))
        return statistics.median(runs) if runs else None

    print(f"\n{image}: this launcher's overhead in containers, by phase (median seconds):")
    print(f"  {'phase':62s}" + "".join(f"{h:>7d}" for h in hosts_list))
    for i, phase in enumerate(PHASES):
        print(f"  {phase:62s}" + cells(statistics.median(b[i] for b in breakdown[image, h])
                                       if breakdown.get((image, h)) else None for h in hosts_list))
    for i, what in enumerate(("  (in the first: first container start -> the master's)",
                              "containers start, first -> last")):
        print(f"  {what:62s}" + cells(statistics.median(s[i] for s in start_spread[image, h])
                                      if start_spread.get((image, h)) else None for h in hosts_list))
    base = hosts_list[0]
    print(f"{'hosts':>5s} {'this launcher (s)':>18s} {'per host (s)':>13s} {f'growth vs {base}':>13s} "
          f"{'toolkit (s)':>12s} {'toolkit / this':>15s}")
    for hosts in hosts_list:
        ours, toolkit = median("ours", hosts), median("toolkit", hosts)
        growth = ours / median("ours", base) if ours is not None and median("ours", base) else None
        print(f"{hosts:5d} " + (f"{ours:18.2f} {ours / hosts:13.3f} " if ours is not None else f"{'-':>18s} {'-':>13s} ")
              + (f"{growth:6.2f}x (n {hosts / base:4.1f}x)" if growth is not None else f"{'-':>13s}") + " "
              + (f"{toolkit:12.1f}" if toolkit is not None else f"{'-':>12s}") + " "
              + (f"{toolkit / ours:14.1f}x" if toolkit is not None and ours else f"{'-':>15s}"))


def write_record(args, overhead: dict, load_start: str) -> None:
    """Every run's overhead of the first image, by launcher and host count, and what it ran under: what --chart
    draws."""
    image = args.image[0]
    record = {"image": image, "hosts": args.hosts, "repeat": args.repeat, "start_gate": args.start_gate,
              "load_start": load_start, "load_end": load(), "cores": os.cpu_count(),
              "overhead": {launcher: {str(hosts): overhead.get((image, launcher, hosts), []) for hosts in args.hosts}
                           for launcher in ("ours", "toolkit")}}
    args.json.write_text(json.dumps(record, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", nargs="+", default=["sagemaker-mxnet-horovod:cpu"],
                        help="one image, or several to compare: they alternate within each round")
    parser.add_argument("--hosts", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--toolkit-hosts", type=int, nargs="*", default=[2, 4, 8],
                        help="counts to run the toolkit at (its overhead is ~35 s of fixed sleeps per job)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--start-gate", action="store_true",
                        help="start every host's launcher at once, after all containers run; count from then")
    charts.add_options(parser, "write every run's overhead here (the first image's)",
                       "the overhead by host count")
    args = parser.parse_args()
    if charts.redraw_only(parser, args, charts.launcher_scale):
        return 0

    overhead: dict = {}  # (image, launcher, hosts) -> [seconds]
    program_time: dict = {}  # (image, launcher, hosts) -> [the program's own seconds: rank start and import in it]
    breakdown: dict = {}  # (image, hosts) -> [phases]
    start_spread: dict = {}  # (image, hosts) -> [(first start -> master start, first -> last start)] (ours)
    failures = []
    load_start = load()
    print(f"load average at the start: {load_start} (1/5/15 min); {os.cpu_count()} cores; overhead counted from "
          + ("the start gate (every launcher starts at once)" if args.start_gate else "the first container's start"),
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        ssh_dir = make_ssh_dir(Path(tmp) / "ssh")
        for round_ in range(args.repeat):
            for hosts in args.hosts:
                for launcher in ("ours", "toolkit"):
                    if launcher == "toolkit" and hosts not in args.toolkit_hosts:
                        continue
                    for n, image in enumerate(args.image):
                        before = load()
                        what = f"round {round_ + 1} {image} {launcher:7s} {hosts:2d} hosts"
                        try:
                            seconds, program, split, spread = run_once(
                                image, launcher, hosts, Path(tmp) / f"{n}-{launcher}-{hosts}-{round_}", ssh_dir,
                                args.start_gate)
                        except RuntimeError as error:
                            failures.append(str(error))
                            print(f"{what}: FAILED (load {before})\n{error}", flush=True)
                            continue
                        overhead.setdefault((image, launcher, hosts), []).append(seconds)
                        program_time.setdefault((image, launcher, hosts), []).append(program)
                        if split:
                            breakdown.setdefault((image, hosts), []).append(split)
                            start_spread.setdefault((image, hosts), []).append(spread)
                        print(f"{what}: overhead {seconds:6.2f} s, program {program:5.1f} s (load before {before}, "
                              f"after {load()})" + (f"; phases {' '.join(f'{x:.2f}' for x in split)}" if split else "")
                              + f"; containers started over {spread[1]:.2f} s, the master {spread[0]:.2f} s after "
                              "the first", flush=True)

    for image in args.image:
        summary(image, args.hosts, overhead, breakdown, start_spread)
    if len(args.image) > 1:
        first = args.image[0]
        for name, table in (("overhead", overhead), ("program's own time", program_time)):
            print(f"\nmedian {name} (s) and {first} / each other image, by host count:")
            for launcher in ("ours", "toolkit"):
                for hosts in args.hosts:
                    runs = [table.get((image, launcher, hosts)) for image in args.image]
                    if not all(runs):
                        continue
                    medians = [statistics.median(r) for r in runs]
                    print(f"  {launcher:7s} {hosts:2d} hosts: " + ", ".join(
                        f"{image} {m:.2f}" + (f" ({medians[0] / m:.2f}x)" if i else "")
                        for i, (image, m) in enumerate(zip(args.image, medians))))
    print(f"\nload average at the end: {load()} (1/5/15 min); {os.cpu_count()} cores")
    if args.json:
        write_record(args, overhead, load_start)
        if args.chart:
            charts.launcher_scale(args.json, args.chart)
    if failures:
        print(f"{len(failures)} job(s) FAILED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

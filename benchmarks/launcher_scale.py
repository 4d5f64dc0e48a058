#!/usr/bin/env python3
"""Launcher overhead at 2, 4, 8 and 16 hosts: this image's `train` vs the sagemaker-training toolkit.

Each job is N containers (one per host, nothing pinned: they share the machine's cores) running
tests/integration/code/allreduce.py (one allreduce per rank, one rank per host). Overhead = first container
start to last container exit, by docker's clock, minus the program's own time (first rank start to last rank
end, as the ranks record them), as in benchmarks/launcher_overhead.py. Counts alternate within each round, so
a change in the machine's load hits every count. Every run prints the load average it ran under.

Prints, per host count: median overhead of each launcher, the ratio, overhead per host, growth relative to the
smallest count (linear growth would equal the host ratio), and this launcher's overhead by phase.

  python3 benchmarks/launcher_scale.py [--image sagemaker-mxnet-horovod:cpu] [--hosts 2 4 8 16]
      [--toolkit-hosts 2 4 8] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from launcher_overhead import PHASES, phases, program_seconds  # noqa: E402
from local_job import JobSpec, run_job  # noqa: E402
from toolkit_job import as_toolkit_job, make_ssh_dir  # noqa: E402

CODE = ROOT / "tests" / "integration" / "code"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def run_once(image: str, launcher: str, hosts: int, workdir: Path, ssh_dir: Path):
    """(overhead in containers, program seconds, phases or None) of one successful job; raises otherwise."""
    hps = {"sagemaker_program": "allreduce.py", "sagemaker_submit_directory": "/opt/ml/code"}
    spec = JobSpec(image=image, hosts=hosts, hyperparameters=hps, code_dir=CODE, hostname_is_alias=True,
                   timeout_s=900, timed_logs=True)
    if launcher == "toolkit":
        spec = as_toolkit_job(spec, ssh_dir)
    result = run_job(spec, workdir)
    if result.timed_out or any(code != 0 for code in result.exit_codes):
        raise RuntimeError(f"{launcher} job on {hosts} hosts failed:\n" + result.describe()[-6000:])
    program = program_seconds(result, ranks=hosts)
    return result.container_seconds - program, program, phases(result) if launcher == "ours" else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--hosts", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--toolkit-hosts", type=int, nargs="*", default=[2, 4, 8],
                        help="counts to run the toolkit at (its overhead is ~35 s of fixed sleeps per job)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    overhead: dict = {}  # (launcher, hosts) -> [seconds]
    breakdown: dict = {}  # hosts -> [phases]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        ssh_dir = make_ssh_dir(Path(tmp) / "ssh")
        for round_ in range(args.repeat):
            for hosts in args.hosts:
                for launcher in ("ours", "toolkit"):
                    if launcher == "toolkit" and hosts not in args.toolkit_hosts:
                        continue
                    before = load()
                    try:
                        seconds, program, split = run_once(args.image, launcher, hosts,
                                                           Path(tmp) / f"{launcher}-{hosts}-{round_}", ssh_dir)
                    except RuntimeError as error:
                        failures.append(str(error))
                        print(f"round {round_ + 1} {launcher:7s} {hosts:2d} hosts: FAILED (load {before})\n{error}",
                              flush=True)
                        continue
                    overhead.setdefault((launcher, hosts), []).append(seconds)
                    if split:
                        breakdown.setdefault(hosts, []).append(split)
                    print(f"round {round_ + 1} {launcher:7s} {hosts:2d} hosts: overhead {seconds:6.2f} s, program "
                          f"{program:5.1f} s (load before {before}, after {load()})"
                          + (f"; phases {' '.join(f'{x:.2f}' for x in split)}" if split else ""), flush=True)

    def median(launcher, hosts):
        runs = overhead.get((launcher, hosts))
        return statistics.median(runs) if runs else None

    print()
    print("this launcher's overhead in containers, by phase (median seconds):")
    print(f"  {'phase':62s}" + "".join(f"{h:>7d}" for h in args.hosts))
    for i, phase in enumerate(PHASES):
        cells = [statistics.median(b[i] for b in breakdown[h]) if breakdown.get(h) else None for h in args.hosts]
        print(f"  {phase:62s}" + "".join(f"{c:7.2f}" if c is not None else f"{'-':>7s}" for c in cells))
    print()
    base = args.hosts[0]
    print(f"{'hosts':>5s} {'this launcher (s)':>18s} {'per host (s)':>13s} {f'growth vs {base}':>13s} "
          f"{'toolkit (s)':>12s} {'toolkit / this':>15s}")
    for hosts in args.hosts:
        ours, toolkit = median("ours", hosts), median("toolkit", hosts)
        growth = ours / median("ours", base) if ours is not None and median("ours", base) else None
        print(f"{hosts:5d} " + (f"{ours:18.2f} {ours / hosts:13.3f} " if ours is not None else f"{'-':>18s} {'-':>13s} ")
              + (f"{growth:6.2f}x (n {hosts / base:4.1f}x)" if growth is not None else f"{'-':>13s}") + " "
              + (f"{toolkit:12.1f}" if toolkit is not None else f"{'-':>12s}") + " "
              + (f"{toolkit / ours:14.1f}x" if toolkit is not None and ours else f"{'-':>15s}"))
    print(f"\nload average at the end: {load()} (1/5/15 min); {os.cpu_count()} cores")
    if failures:
        print(f"{len(failures)} job(s) FAILED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

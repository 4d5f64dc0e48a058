#!/usr/bin/env python3
"""Launcher overhead, side by side: this image's `train` vs the sagemaker-training toolkit's MPI runner.

Both run the same 2-host job (tests/integration/code/allreduce.py: one allreduce per rank) in the same
image. Overhead = wall time minus the program's own time (first rank start to last rank end, as the ranks
record them). Wall time is taken twice: from the first `docker run` to the last container's exit (includes
`docker run` itself, the same for both) and from the first container's start to the last one's exit (the
launchers' part alone), both ends by docker's clock. Prints medians, ratios, and where this launcher's
overhead goes.

  python3 -m benchmarks.launcher_overhead [--image sagemaker-mxnet-horovod:cpu] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.common.launcher_phases import PHASES, phases, program_seconds
from scripts.local_job import JobSpec, run_job
from scripts.local_job.toolkit import as_toolkit_job, make_ssh_dir

ROOT = Path(__file__).resolve().parents[1]

CODE = ROOT / "tests" / "integration" / "code"

def run_once(image: str, launcher: str, workdir: Path, ssh_dir: Path):
    hps = {"sagemaker_program": "allreduce.py", "sagemaker_submit_directory": "/opt/ml/code"}
    spec = JobSpec(image=image, hosts=2, hyperparameters=hps, code_dir=CODE, hostname_is_alias=True, timeout_s=900,
                   timed_logs=True)
    if launcher == "toolkit":
        spec = as_toolkit_job(spec, ssh_dir)
    result = run_job(spec, workdir)
    if result.exit_codes != [0, 0] or result.timed_out:
        raise RuntimeError(f"{launcher} job failed:\n" + result.describe())
    program = program_seconds(result)
    return (result.run_seconds, result.run_seconds - program, result.container_seconds - program), phases(result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=("ours", "toolkit"), help="run one launcher (no ratio): for profiling")
    args = parser.parse_args()

    rows = {"this launcher": [], "toolkit": []}
    breakdowns = []
    with tempfile.TemporaryDirectory() as tmp:
        ssh_dir = make_ssh_dir(Path(tmp) / "ssh")
        for i in range(args.repeat):
            for name, launcher in (("this launcher", "ours"), ("toolkit", "toolkit")):
                if args.only and launcher != args.only:
                    continue
                (wall, overhead, container_overhead), breakdown = run_once(
                    args.image, launcher, Path(tmp) / f"{launcher}-{i}", ssh_dir)
                rows[name].append((wall, overhead, container_overhead))
                if launcher == "ours" and breakdown:
                    breakdowns.append(breakdown)
                print(f"run {i + 1}/{args.repeat} {name:13s}: wall {wall:6.1f} s, overhead {overhead:6.1f} s, "
                      f"in containers {container_overhead:6.1f} s", flush=True)
    def median(name, column):
        return statistics.median(row[column] for row in rows[name])

    if breakdowns:
        print()
        print("this launcher's overhead in containers, by phase (median seconds):")
        for i, phase in enumerate(PHASES):
            print(f"  {statistics.median(b[i] for b in breakdowns):6.2f}  {phase}")
    print()
    print(f"{'launcher':15s} {'wall (s)':>9s} {'overhead (s)':>13s} {'overhead in containers (s)':>27s}")
    for name in rows:
        if rows[name]:
            print(f"{name:15s} {median(name, 0):9.1f} {median(name, 1):13.1f} {median(name, 2):27.1f}")
    if all(rows.values()):
        print(f"overhead ratio (toolkit / this launcher): {median('toolkit', 1) / median('this launcher', 1):.1f}x; "
              f"in containers: {median('toolkit', 2) / median('this launcher', 2):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

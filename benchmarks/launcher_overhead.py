#!/usr/bin/env python3
"""Launcher overhead, side by side: this image's `train` vs the sagemaker-training toolkit's MPI runner.

Both run the same 2-host job (tests/integration/code/allreduce.py: one allreduce per rank) in the same
image. Overhead = wall time minus the program's own time (first rank start to last rank end, as the ranks
record them). Wall time is taken twice: from the first `docker run` to the last container's exit (includes
`docker run` itself, the same for both) and from the first container's start to the last one's exit (the
launchers' part alone), both ends by docker's clock. Prints medians, ratios, and where this launcher's
overhead goes.

  python3 benchmarks/launcher_overhead.py [--image sagemaker-mxnet-horovod:cpu] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from local_job import JobSpec, run_job  # noqa: E402
from local_job.toolkit import as_toolkit_job, make_ssh_dir  # noqa: E402

CODE = ROOT / "tests" / "integration" / "code"

def program_seconds(result, ranks: int = 2) -> float:
    if sum(1 for host in result.hosts for _ in (host.root / "model").glob("rank-*.json")) != ranks:
        raise RuntimeError("a rank did not finish:\n" + result.describe())
    first_start, last_end = rank_times(result)
    return last_end - first_start


def rank_times(result) -> tuple[float, float]:
    records = [json.loads(path.read_text()) for host in result.hosts for path in (host.root / "model").glob("rank-*.json")]
    return min(r["started"] for r in records), max(r["finished"] for r in records)


# Where this launcher's overhead goes: (phase, the master's log line that ends it; None: see phases()).
PHASES = (
    "containers start (or the gate) -> launcher logs its plan",
    "plan -> workers checked in (handshake, sshd)",
    "workers in -> first rank's Python runs (mpirun, ssh, orted)",
    "last rank done -> mpirun exits (MPI/Horovod shutdown)",
    "mpirun exits -> workers released",
    "released -> last container exits",
)


def phases(result) -> list[float] | None:
    """Seconds per PHASES entry, by docker's clock and the ranks' own; None if a line is missing."""
    master = result.master
    marks = [master.first_log_time("train: "), master.first_log_time("worker(s) ready in"),
             master.first_log_time("train: job "), master.first_log_time("worker(s) released in")]
    if None in marks:
        return None
    first_start, last_end = rank_times(result)
    container_start = result.hosts_started_at
    container_exit = max(h.finished_at for h in result.hosts)
    plan_at, ready_at, exited_at, released_at = marks
    return [plan_at - container_start, ready_at - plan_at, first_start - ready_at, exited_at - last_end,
            released_at - exited_at, container_exit - released_at]


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

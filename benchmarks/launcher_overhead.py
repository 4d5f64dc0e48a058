#!/usr/bin/env python3
"""Launcher overhead, side by side: this image's `train` vs the sagemaker-training toolkit's MPI runner.

Both run the same 2-host job (tests/integration/code/allreduce.py: one allreduce per rank) in the same
image. Overhead = wall time from the first `docker run` to the last container's exit, minus the program's
own time (first rank start to last rank end, as the ranks record it). Wall time is taken twice: by the
harness (includes `docker run` and polling latency, the same for both) and by docker's own clock from the
first container's start to the last one's exit (the launchers' part alone). Prints medians and ratios.

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
from toolkit_job import as_toolkit_job, make_ssh_dir  # noqa: E402

CODE = ROOT / "tests" / "integration" / "code"

def program_seconds(result) -> float:
    starts, ends = [], []
    for host in result.hosts:
        for path in (host.root / "model").glob("rank-*.json"):
            record = json.loads(path.read_text())
            starts.append(record["started"])
            ends.append(record["finished"])
    if len(starts) != 2:
        raise RuntimeError("a rank did not finish:\n" + result.describe())
    return max(ends) - min(starts)


def run_once(image: str, launcher: str, workdir: Path, ssh_dir: Path) -> tuple[float, float, float]:
    hps = {"sagemaker_program": "allreduce.py", "sagemaker_submit_directory": "/opt/ml/code"}
    spec = JobSpec(image=image, hosts=2, hyperparameters=hps, code_dir=CODE, hostname_is_alias=True, timeout_s=900)
    if launcher == "toolkit":
        spec = as_toolkit_job(spec, ssh_dir)
    result = run_job(spec, workdir)
    if result.exit_codes != [0, 0] or result.timed_out:
        raise RuntimeError(f"{launcher} job failed:\n" + result.describe())
    program = program_seconds(result)
    return result.seconds, result.seconds - program, result.container_seconds - program


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    rows = {"this launcher": [], "toolkit": []}
    with tempfile.TemporaryDirectory() as tmp:
        ssh_dir = make_ssh_dir(Path(tmp) / "ssh")
        for i in range(args.repeat):
            for name, launcher in (("this launcher", "ours"), ("toolkit", "toolkit")):
                wall, overhead, container_overhead = run_once(args.image, launcher, Path(tmp) / f"{launcher}-{i}",
                                                              ssh_dir)
                rows[name].append((wall, overhead, container_overhead))
                print(f"run {i + 1}/{args.repeat} {name:13s}: wall {wall:6.1f} s, overhead {overhead:6.1f} s, "
                      f"in containers {container_overhead:6.1f} s", flush=True)
    def median(name, column):
        return statistics.median(row[column] for row in rows[name])

    print()
    print(f"{'launcher':15s} {'wall (s)':>9s} {'overhead (s)':>13s} {'overhead in containers (s)':>27s}")
    for name in rows:
        print(f"{name:15s} {median(name, 0):9.1f} {median(name, 1):13.1f} {median(name, 2):27.1f}")
    print(f"overhead ratio (toolkit / this launcher): {median('toolkit', 1) / median('this launcher', 1):.1f}x; "
          f"in containers: {median('toolkit', 2) / median('this launcher', 2):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

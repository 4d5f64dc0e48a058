#!/usr/bin/env python3
"""Run the fault scenarios outside pytest and print their report table, for this image's launcher, for
the sagemaker-training toolkit's MPI runner in the same image, or for both (docs/faults.md shows both).

  PYTHONPATH=scripts python3 tests/faults/report.py --launcher both [--only "one rank raises"] [--image IMAGE]

or `make fault-report`. scripts/ (local_job, toolkit_job) comes from PYTHONPATH here, from pytest.ini under pytest.

The toolkit waits up to an hour for a missing worker; the harness stops any job after 240 s, which the
table shows as a host that never exited ("-").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from scenarios import SCENARIOS, Context, format_report, make_mnist_data, run_scenario
from toolkit_job import make_ssh_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--launcher", choices=("ours", "toolkit", "both"), default="both")
    parser.add_argument("--only", action="append", default=[], metavar="SCENARIO", help="scenario name (repeatable)")
    args = parser.parse_args()
    unknown = set(args.only) - {s.name for s in SCENARIOS}
    if unknown:
        parser.error(f"no scenario named {sorted(unknown)}; scenarios: {[s.name for s in SCENARIOS]}")
    launchers = ("ours", "toolkit") if args.launcher == "both" else (args.launcher,)
    tables = []
    with tempfile.TemporaryDirectory(prefix="fault-report-") as tmp:
        root = Path(tmp)
        mnist, shards = make_mnist_data(args.image, root / "data")
        ssh_dir = make_ssh_dir(root / "ssh")
        for launcher in launchers:
            started = time.monotonic()
            observations = []
            for index, scenario in enumerate(SCENARIOS):
                if (args.only and scenario.name not in args.only) or (launcher == "toolkit" and not scenario.toolkit):
                    continue
                workdir = root / f"{launcher}-{index}"
                workdir.mkdir()
                ctx = Context(args.image, workdir, mnist, shards, launcher=launcher)
                try:
                    observation, _ = run_scenario(scenario, ctx, ssh_dir)
                except Exception as error:  # noqa: BLE001 - one broken scenario must not hide the others
                    print(f"{scenario.name}: harness error: {error}", file=sys.stderr)
                    continue
                observations.append(observation)
                print(f"[{launcher}] {scenario.name}: {'pass' if observation.passed else 'FAIL'} "
                      f"{'; '.join(observation.problems)}", file=sys.stderr, flush=True)
            name = "this image's launcher" if launcher == "ours" else "sagemaker-training toolkit's MPI runner"
            tables.append(format_report(observations, f"\n{name}: {sum(o.passed for o in observations)}/"
                                                      f"{len(observations)} as expected, "
                                                      f"{time.monotonic() - started:.0f} s"))
    print("\n".join(tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())

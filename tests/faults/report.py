#!/usr/bin/env python3
"""Run the fault scenarios outside pytest and print their report table, for this image's launcher, for
the sagemaker-training toolkit's MPI runner in the same image, or for both (docs/faults.md shows both).

  PYTHONPATH=scripts python3 tests/faults/report.py --launcher both [--only "one rank raises"] [--image IMAGE]

or `make fault-report`. scripts/ (the local_job package) comes from PYTHONPATH here, from pytest.ini under pytest.

The toolkit waits up to an hour for a missing worker; the harness stops any job after 240 s, which the
table shows as a host that never exited ("-"). A scenario whose harness failed (the job could not be built,
run or judged) is a row of its own, ERROR, counted as not as expected, and makes the exit status 1: a table
without it would look complete.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

from fault_harness import (
    Context,
    Observation,
    Scenario,
    format_report,
    harness_error_observation,
    make_mnist_data,
    run_scenario,
    summary,
)
from local_job.toolkit import make_ssh_dir
from scenarios import SCENARIOS


def observe(scenario: Scenario, ctx: Context, ssh_dir: Path | None) -> Observation:
    """The scenario's Observation; when the harness itself fails, one that says so (never raises)."""
    try:
        observation, _ = run_scenario(scenario, ctx, ssh_dir)
    except Exception as error:  # noqa: BLE001 - one broken scenario must not hide the others
        traceback.print_exc()
        return harness_error_observation(scenario, ctx.launcher, error)
    return observation


def exit_status(observations: list) -> int:
    """1 when the harness could not observe a scenario: the table is incomplete. Scenarios observed to fail
    are the table's content (the toolkit's runner fails most of them), not an error of the report."""
    return 1 if any(o.harness_error is not None for o in observations) else 0


def run_launcher(launcher: str, scenarios: list, make_context, ssh_dir: Path | None) -> tuple[list, str]:
    """Every scenario under one launcher (make_context(scenario) gives each its Context): the observations,
    one per scenario, and their table."""
    started = time.monotonic()
    observations = []
    for scenario in scenarios:
        observation = observe(scenario, make_context(scenario), ssh_dir)
        observations.append(observation)
        print(f"[{launcher}] {scenario.name}: {observation.result} {'; '.join(observation.problems)}",
              file=sys.stderr, flush=True)
    name = "this image's launcher" if launcher == "ours" else "sagemaker-training toolkit's MPI runner"
    return observations, format_report(observations, f"\n{name}: {summary(observations)}, "
                                                      f"{time.monotonic() - started:.0f} s")


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
    tables, every_observation = [], []
    with tempfile.TemporaryDirectory(prefix="fault-report-") as tmp:
        root = Path(tmp)
        mnist, shards = make_mnist_data(args.image, root / "data")
        ssh_dir = make_ssh_dir(root / "ssh")
        for launcher in launchers:
            chosen = [s for s in SCENARIOS if (not args.only or s.name in args.only)
                      and (launcher == "ours" or s.toolkit)]

            def make_context(scenario: Scenario, launcher: str = launcher) -> Context:
                workdir = root / f"{launcher}-{SCENARIOS.index(scenario)}"
                workdir.mkdir()
                return Context(args.image, workdir, mnist, shards, launcher=launcher)

            observations, table = run_launcher(launcher, chosen, make_context, ssh_dir)
            tables.append(table)
            every_observation += observations
    print("\n".join(tables))
    return exit_status(every_observation)


if __name__ == "__main__":
    sys.exit(main())

"""report.py's accounting, on the host without Docker: a scenario whose harness fails (here its job cannot
even be built) is a row of the table (ERROR), counts as not as expected, and makes the exit status 1."""

import dataclasses
import re

from fault_harness import Context, Observation, Scenario
from report import exit_status, run_launcher

OBSERVED = Observation("worker killed mid-training", "toolkit", "master stops the job", [1, 137], "", 1.2, [])


def unbuildable(ctx: Context):
    raise RuntimeError("docker: network not found\n(the rest of docker's message)")


def test_a_scenario_whose_harness_failed_is_in_the_table_and_its_count_and_fails_the_report(tmp_path):
    scenarios = [Scenario("a job that cannot be built", "both exit 2", unbuildable, exits=(2, 2))]
    context = Context("no-image", tmp_path, tmp_path / "mnist", tmp_path / "shards")
    observations, table = run_launcher("ours", scenarios, lambda scenario: context, None)
    assert [(o.scenario, o.result, o.harness_error) for o in observations] == [
        ("a job that cannot be built", "ERROR", "RuntimeError: docker: network not found")]
    assert "this image's launcher: 0/1 as expected, 1 harness error, " in table
    row = next(line for line in table.splitlines() if line.startswith("| a job that cannot be built"))
    assert re.search(r"\| harness error: RuntimeError: docker: network not found +\| - +\| ERROR +\|$", row), row
    assert exit_status([OBSERVED, *observations]) == 1


def test_scenarios_observed_to_fail_are_the_reports_content_not_its_error():
    failed = dataclasses.replace(OBSERVED, problems=["algo-2 exited 0 (expected non-zero)"])
    assert (OBSERVED.result, failed.result) == ("pass", "FAIL")
    assert exit_status([OBSERVED, failed]) == 0

"""The fault-injection suite: every scenario of scenarios.py (and ps_faults.py) across real containers of the CPU image.

Each asserts every host's exit code, the first line of the failure file and the time from fault to exit;
the table of all scenarios is printed at the end of the run (conftest.py), a scenario whose harness failed
included (ERROR). Those whose verdict needs CPU time to spare (Scenario.alone) carry the mark `alone`: make test runs
them by itself, after its lanes."""

import re

import pytest
from fault_harness import OBSERVATIONS, harness_error_observation, run_scenario
from scenarios import SCENARIOS


@pytest.mark.parametrize("scenario", [pytest.param(s, marks=pytest.mark.alone) if s.alone else s for s in SCENARIOS],
                         ids=[re.sub(r"[^a-z0-9.]+", "-", s.name.lower()) for s in SCENARIOS])
def test_fault(scenario, context):
    try:
        observation, result = run_scenario(scenario, context)
    except Exception as error:
        OBSERVATIONS.append(harness_error_observation(scenario, context.launcher, error))
        raise
    OBSERVATIONS.append(observation)
    assert observation.passed, "\n".join(observation.problems) + "\n" + result.describe()

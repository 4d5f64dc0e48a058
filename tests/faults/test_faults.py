"""The fault-injection suite: every scenario of scenarios.py across real containers of the CPU image.

Each asserts every host's exit code, the first line of the failure file and the time from fault to exit;
the table of all scenarios is printed at the end of the run (conftest.py), a scenario whose harness failed
included (ERROR)."""

import re

import pytest
from scenarios import OBSERVATIONS, SCENARIOS, harness_error_observation, run_scenario


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[re.sub(r"[^a-z0-9.]+", "-", s.name.lower()) for s in SCENARIOS])
def test_fault(scenario, context):
    try:
        observation, result = run_scenario(scenario, context)
    except Exception as error:
        OBSERVATIONS.append(harness_error_observation(scenario, context.launcher, error))
        raise
    OBSERVATIONS.append(observation)
    assert observation.passed, "\n".join(observation.problems) + "\n" + result.describe()

"""env_rules.py's hang watch rule: the stall and progress timeouts as the environment of every rank. (A topic of
env_rules' tests, kept apart from test_env_rules.py; parsing the knobs: test_config.py.)"""

import pytest
from sagemaker_mxnet_horovod.plan.env_rules import hang_watch_env
from unit_helpers.plan_cases import config, plan


@pytest.mark.parametrize("stall,check,shutdown", [
    (3600, "60", "3600"),  # Horovod's own 60 s warnings, the job ended after an hour
    (10, "5", "10"),  # at most half the timeout: the job ends within timeout + 2 checks
    (2.5, "1", "3"),  # Horovod takes whole seconds
    (0.2, "1", "1"),  # never below a second; shutdown never below the check (Horovod would ignore it)
])
def test_stall_timeout_sets_horovods_stall_inspector(stall, check, shutdown):
    env = {name: value for name, value, _ in hang_watch_env(stall, 0)}
    assert env == {"HOROVOD_STALL_CHECK_TIME_SECONDS": check, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": shutdown}
    assert int(env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"]) >= int(env["HOROVOD_STALL_CHECK_TIME_SECONDS"])


def test_zero_leaves_horovod_alone_and_progress_sets_the_rank_watch():
    assert hang_watch_env(0, 0) == []
    assert [(n, v) for n, v, _ in hang_watch_env(0, 600)] == [("SMMH_PROGRESS_TIMEOUT_S", "600")]


def test_plan_exports_them_to_every_rank_and_a_users_variable_wins():
    p = plan(config({"mpi_progress_timeout_s": "300"}))
    assert p.env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] == "3600"
    assert p.env["SMMH_PROGRESS_TIMEOUT_S"] == "300"
    for name in ("HOROVOD_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "SMMH_PROGRESS_TIMEOUT_S"):
        assert p.command[p.command.index(name) - 1] == "-x"
    mine = plan(config(), env={"PATH": "/usr/bin", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "0"})
    assert "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS" not in mine.env
    assert any(n.startswith("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=0 (set by you") for n in mine.notes)

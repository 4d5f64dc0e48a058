"""The hang timeouts from hyperparameter to environment: parse (config) and plan rules."""

from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.config import (
    DEFAULT_STALL_TIMEOUT_S,
    ConfigError,
    Paths,
    parse_launcher_settings,
    parse_training_config,
)
from sagemaker_mxnet_horovod.env_rules import hang_watch_env
from sagemaker_mxnet_horovod.facts import HostFacts
from sagemaker_mxnet_horovod.plan import make_plan

CPU2 = HostFacts(cpu_count=2, interfaces=("eth0",), default_route_interface="eth0", hostname="c0ffee")


def two_host_plan(hps, env=None):
    config = parse_training_config(Paths(Path("/opt/ml")), {"current_host": "algo-1", "hosts": ["algo-1", "algo-2"]},
                                   {"sagemaker_program": "mnist", **hps}, {"train": {}}, {})
    return make_plan(config, CPU2, env or {"PATH": "/usr/bin"}, python="python")


def test_defaults_end_stalls_after_an_hour_and_leave_progress_off():
    settings, warnings = parse_launcher_settings({}, {})
    assert settings.stall_timeout_s == DEFAULT_STALL_TIMEOUT_S == 3600
    assert settings.progress_timeout_s == 0
    assert warnings == []


def test_knobs_parse_from_hyperparameters_and_environment():
    settings, warnings = parse_launcher_settings({"horovod_stall_timeout_s": "0", "mpi_progress_timeout_s": "900"}, {})
    assert (settings.stall_timeout_s, settings.progress_timeout_s, warnings) == (0, 900, [])
    settings, _ = parse_launcher_settings({}, {"HOROVOD_STALL_TIMEOUT_S": "120", "MPI_PROGRESS_TIMEOUT_S": "60"})
    assert (settings.stall_timeout_s, settings.progress_timeout_s) == (120, 60)


@pytest.mark.parametrize("hps,message", [
    ({"horovod_stall_timeout_s": "-1"}, "horovod_stall_timeout_s='-1' must be >= 0"),
    ({"horovod_stall_timeout_s": "an hour"}, "horovod_stall_timeout_s='an hour' is not a number"),
    ({"mpi_progress_timeout_s": "inf"}, "mpi_progress_timeout_s='inf' is not a finite number"),
])
def test_bad_values_name_key_and_value(hps, message):
    with pytest.raises(ConfigError, match=message):
        parse_launcher_settings(hps, {})


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
    p = two_host_plan({"mpi_progress_timeout_s": "300"})
    assert p.env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] == "3600"
    assert p.env["SMMH_PROGRESS_TIMEOUT_S"] == "300"
    for name in ("HOROVOD_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "SMMH_PROGRESS_TIMEOUT_S"):
        assert p.command[p.command.index(name) - 1] == "-x"
    mine = two_host_plan({}, env={"PATH": "/usr/bin", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "0"})
    assert "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS" not in mine.env
    assert any(n.startswith("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=0 (set by you") for n in mine.notes)

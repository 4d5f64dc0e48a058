"""core/exits.py: the one map from the error that ends `train` to its exit code, and SageMaker's stop timing."""

import signal

from sagemaker_mxnet_horovod.core.exits import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_STOPPED,
    SAGEMAKER_KILL_AFTER_S,
    STOP_GRACE_S,
    ClusterError,
    ConfigError,
    PlanError,
    StopRequested,
    exit_code_of,
)


def test_each_error_maps_to_its_exit_code():
    assert exit_code_of(ConfigError("hosts is empty")) == EXIT_CONFIG == 2
    assert exit_code_of(PlanError("more processes than GPUs")) == EXIT_CONFIG
    assert exit_code_of(StopRequested("SIGTERM")) == EXIT_STOPPED == 128 + signal.SIGTERM == 143
    assert exit_code_of(ClusterError("worker algo-2 did not check in")) == EXIT_FAILED == 1
    assert exit_code_of(KeyError("anything else")) == EXIT_FAILED


def test_the_ranks_grace_leaves_the_launcher_time_before_sagemakers_sigkill():
    # After the grace, mpirun gets SIGTERM and, 10 s later, SIGKILL (supervise.JobProcess): all before SageMaker's.
    assert STOP_GRACE_S + 10 < SAGEMAKER_KILL_AFTER_S

"""outcome.py: a host's Outcome exits with its failure's code, and 0 without one."""

from sagemaker_mxnet_horovod.core.failure import Failure
from sagemaker_mxnet_horovod.core.outcome import Outcome


def test_an_outcome_exits_with_its_failures_code_and_0_without_one():
    assert Outcome().exit_code == 0
    assert Outcome(Failure("stopped by SIGTERM before the job started", exit_code=143)).exit_code == 143

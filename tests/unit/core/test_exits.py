"""core/exits.py: SageMaker's stop timing leaves the launcher its time; a stop before the job says which signal.
(The map from each error to its failure and exit code: test_cli.py, cli.failure_of.)"""

import signal

from sagemaker_mxnet_horovod.core.exits import EXIT_STOPPED, SAGEMAKER_KILL_AFTER_S, STOP_GRACE_S, StopRequested


def test_a_stop_says_its_signal_and_exits_as_sigterm_would():
    stop = StopRequested(signal.SIGINT)
    assert (stop.signum, str(stop)) == (signal.SIGINT, "SIGINT")
    assert EXIT_STOPPED == 128 + signal.SIGTERM == 143


def test_the_ranks_grace_leaves_the_launcher_time_before_sagemakers_sigkill():
    # After the grace, mpirun gets SIGTERM and, 10 s later, SIGKILL (supervise.JobProcess): all before SageMaker's.
    assert STOP_GRACE_S + 10 < SAGEMAKER_KILL_AFTER_S

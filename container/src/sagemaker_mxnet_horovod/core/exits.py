"""How `train` ends: its exit codes, the errors each step raises, and SageMaker's stop timing. cli.failure_of maps
every error that ends `train` to its failure and exit code, in one place (a stop: stop.stopped)."""

from __future__ import annotations

import signal

EXIT_FAILED = 1  # the job ran and failed, or the launcher could not run it
EXIT_CONFIG = 2  # the job's configuration is wrong; nothing ran
EXIT_STOPPED = 128 + signal.SIGTERM  # 143: stopped by SIGTERM (SageMaker's stop, a spot interruption)

# SageMaker sends SIGTERM, then SIGKILL this long after (StopTrainingJob, spot interruption).
SAGEMAKER_KILL_AFTER_S = 120.0
# After SIGTERM the ranks get this long to checkpoint and exit before the job is stopped outright; the rest of
# SageMaker's 120 s is for mpirun and the launcher to end and write the failure file.
STOP_GRACE_S = 100.0


class ConfigError(ValueError):
    """The job's configuration is invalid; the message says where and why (exit 2)."""


class PlanError(ConfigError):
    """The configuration is valid but cannot be run on these hosts (exit 2)."""


class SetupError(RuntimeError):
    """This host could not be readied for the job (the user's code, its requirements); the message says why (exit 1)."""


class ClusterError(RuntimeError):
    """A peer did not do its part in time, or said why it could not (exit 1)."""


class StopRequested(Exception):
    """SIGTERM or SIGINT arrived before the job's run listened for it (stop.py; exit 143)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

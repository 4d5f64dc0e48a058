"""The one stop path. SageMaker stops a job (StopTrainingJob, a spot interruption) with SIGTERM, then SIGKILL 120 s
later; SIGINT (Ctrl-C on a local run) is a stop too.

`train` handles both signals once, here (install). Before the job runs, a stop raises StopRequested in the main
thread, which ends whatever it waits for (parsing, installing the user's code, the workers' check-in). Once a run
listens (listen), each stop signal is handed to it, once (SageMaker and compose may both send SIGTERM: one stop is
enough): the run passes it on (to its ranks, its processes, the other hosts) and ends as the stop says.

And one conversion of a stop into the failure file's words and `train`'s exit code, 143, whatever the backend and
the moment: stopped().
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

from sagemaker_mxnet_horovod.core.exits import EXIT_STOPPED, SAGEMAKER_KILL_AFTER_S, StopRequested
from sagemaker_mxnet_horovod.core.failure import Failure, signal_name

SIGNALS = (signal.SIGTERM, signal.SIGINT)

_listener: Callable[[int], object] | None = None  # the running job's, once it listens
_handed: set[int] = set()  # the signals handed to it so far
_first_at: list[float] = []  # time.monotonic() when the first stop signal came


def _on_signal(signum: int, _frame) -> None:
    if not _first_at:
        _first_at.append(time.monotonic())
    if _listener is None:
        raise StopRequested(signum)
    if signum in _handed:
        return
    _handed.add(signum)
    _listener(signum)


def install() -> None:
    """SIGTERM and SIGINT are stops from now on (a no-op once they are)."""
    for signum in SIGNALS:
        if signal.getsignal(signum) is not _on_signal:
            signal.signal(signum, _on_signal)


def listen(listener: Callable[[int], object]) -> None:
    """From now on a stop is the run's: listener(signum) once for each signal that arrives, from the main thread."""
    global _listener
    install()
    _listener = listener
    _handed.clear()


def seconds_to_kill() -> float | None:
    """How long until SageMaker's SIGKILL, counted from the first stop signal; None when no stop came."""
    return SAGEMAKER_KILL_AFTER_S - (time.monotonic() - _first_at[0]) if _first_at else None


def stopped(signum: int, how: str, host: str | None = None) -> Failure:
    """A stop as the failure file says it, and `train` exits with (143). how: where the job stood then ('the job had
    not started', 'every worker had ended', 'the job exited with code 143 (SIGTERM)')."""
    return Failure(f"stopped by {signal_name(signum)} (SageMaker stop or spot interruption); {how}", EXIT_STOPPED,
                   host=host, signal_number=signum)

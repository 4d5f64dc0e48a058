"""core/stop.py: the one stop path, with real signals to this process: before a run listens, SIGTERM and SIGINT end
what the main thread waits for (StopRequested, naming the signal); once a run listens, each signal is handed to it
once; every stop is said the same way and exits 143."""

import os
import signal
import time

import pytest
from sagemaker_mxnet_horovod.core import stop
from sagemaker_mxnet_horovod.core.exits import StopRequested

pytestmark = pytest.mark.usefixtures("restore_signal_handlers")


def wait_for_signal() -> None:
    """Where the main thread waits when a stop comes (a signal is handled between two of its steps)."""
    deadline = time.monotonic() + 10  # generous: the handler runs within moments; not a speed bound
    while time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.fixture
def before_the_run(monkeypatch):
    monkeypatch.setattr(stop, "_listener", None)  # as `train` starts: nobody listens yet
    stop.install()


@pytest.mark.usefixtures("before_the_run")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_before_a_run_listens_a_stop_ends_what_the_main_thread_waits_for(signum):
    with pytest.raises(StopRequested) as raised:
        os.kill(os.getpid(), signum)
        wait_for_signal()
    assert raised.value.signum == signum


@pytest.mark.usefixtures("before_the_run")
def test_a_listening_run_gets_each_signal_once():
    handed = []
    stop.listen(handed.append)
    for signum in (signal.SIGTERM, signal.SIGTERM, signal.SIGINT):  # SageMaker and compose both send SIGTERM
        os.kill(os.getpid(), signum)
    deadline = time.monotonic() + 10
    while len(handed) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert handed == [signal.SIGTERM, signal.SIGINT]


@pytest.mark.usefixtures("before_the_run")
def test_the_time_left_before_sagemakers_sigkill_counts_from_the_first_stop(monkeypatch):
    monkeypatch.setattr(stop, "_first_at", [])
    assert stop.seconds_to_kill() is None
    stop.listen(lambda signum: None)
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while not stop._first_at and time.monotonic() < deadline:
        time.sleep(0.01)
    first = stop._first_at[0]
    os.kill(os.getpid(), signal.SIGTERM)  # a second stop (compose's) does not restart the count
    time.sleep(0.05)
    left, now = stop.seconds_to_kill(), time.monotonic()
    assert stop._first_at == [first] and left == pytest.approx(120 - (now - first), abs=0.01)


def test_every_stop_is_said_one_way_and_exits_143():
    failure = stop.stopped(signal.SIGINT, "every worker had ended", host="algo-1")
    assert failure.cause == "stopped by SIGINT (SageMaker stop or spot interruption); every worker had ended"
    assert (failure.exit_code, failure.signal_number, failure.host) == (143, signal.SIGINT, "algo-1")

"""cluster.py: Master.wait_launched, the launcher's bound on mpirun's daemon start (mpirun alone waits forever),
and the pace of a worker's connection retries. The handshake itself runs across real containers (tests/integration)."""

import threading
import time
from pathlib import Path

from sagemaker_mxnet_horovod.cluster import Master


def master_with(workers):
    master = Master(tuple(workers), port=0, bind_address="", run_dir=Path("/nonexistent"), deadline=0)
    master.links = {host: object() for host in workers}
    return master


def test_names_the_workers_without_a_daemon_at_the_deadline():
    master = master_with(["algo-2", "algo-3"])
    master.launched.add("algo-3")
    started = time.monotonic()
    assert master.wait_launched(started + 0.2) == ["algo-2"]
    assert 0.2 <= time.monotonic() - started < 2


def test_returns_as_soon_as_every_worker_reports():
    master = master_with(["algo-2"])

    def report():
        with master.cond:
            master.launched.add("algo-2")
            master.cond.notify_all()

    threading.Timer(0.1, report).start()
    started = time.monotonic()
    assert master.wait_launched(started + 30) == []
    assert time.monotonic() - started < 5


def test_a_finished_job_stops_the_wait():
    master = master_with(["algo-2"])

    def finish():
        with master.cond:
            master.closing = True
            master.cond.notify_all()

    threading.Timer(0.1, finish).start()
    started = time.monotonic()
    assert master.wait_launched(started + 30) == []
    assert time.monotonic() - started < 5


def test_retry_delays_stay_short_while_peers_start_together_then_back_off():
    from itertools import islice

    from sagemaker_mxnet_horovod.cluster import retry_delays

    delays = list(islice(retry_delays(fast_s=0.05, fast_for_s=5.0, slowest_s=1.0), 200))
    fast = [d for d in delays if d == 0.05]
    assert len(fast) == 100  # 5 s of 50 ms pauses: a worker notices the master within 50 ms of it listening
    assert delays[100:106] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert max(delays) == 1.0

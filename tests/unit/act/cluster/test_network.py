"""cluster/network.py: the pace of a worker's attempts to reach the master while the job's hosts start together
and after, over real sockets on this host."""

import json
import socket
import threading
import time
from itertools import islice

from sagemaker_mxnet_horovod.act.cluster.network import connect, connect_timeout, retry_delays


def test_retry_delays_stay_short_while_peers_start_together_then_back_off():
    delays = list(islice(retry_delays(fast_s=0.05, fast_for_s=5.0, slowest_s=1.0), 200))
    fast = [d for d in delays if d == 0.05]
    assert len(fast) == 100  # 5 s of 50 ms pauses: a worker notices the master within 50 ms of it listening
    assert delays[100:106] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert max(delays) == 1.0


def test_a_worker_whose_syns_are_dropped_gets_in_once_there_is_room():
    """A listen queue that is full drops SYNs as a container not yet on the network does: the worker keeps
    trying and gets in once there is room. How much sooner its fresh SYNs get in than the kernel's own resend
    (1 s) is a speed, measured side by side by benchmarks/connect_retry.py."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):  # fills the listen queue
            room = threading.Timer(0.3, server.accept)
            room.start()
            connection = connect("127.0.0.1", port, time.monotonic() + 10)
            room.join()
            server.settimeout(10)
            accepted, _ = server.accept()  # the worker's connection, queued once there was room
            accepted.settimeout(10)
            connection.send({"type": "hello"})
            assert json.loads(accepted.makefile("r").readline()) == {"type": "hello"}
            accepted.close()
            connection.close()


def test_connect_attempts_are_short_while_hosts_start_together_then_patient():
    assert connect_timeout(0.0) == connect_timeout(4.9) == 0.2
    assert connect_timeout(5.0) == connect_timeout(60.0) == 5.0

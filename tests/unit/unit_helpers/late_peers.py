"""Peers that come long after a wait's deadline, for the tests of waits that must end at their deadline: a wait that
ignored its deadline would meet the late peer and end otherwise, so the test fails on what the wait returns, with no
bound on how long it took. A uniquely named helper, as every helper under tests/."""

import contextlib
import json
import socket
import threading

from sagemaker_mxnet_horovod import __version__

LATE_S = 30.0  # far past the deadlines these tests set (a second or less)


@contextlib.contextmanager
def arriving_late(arrive):
    """arrive() LATE_S after entering, unless the block has ended by then."""
    timer = threading.Timer(LATE_S, arrive)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def master_listening(port: int) -> None:
    """A master that listens on 127.0.0.1:port at last, and hangs up on each check-in."""
    server = socket.create_server(("127.0.0.1", port))

    def hang_up() -> None:
        while True:
            connection, _ = server.accept()
            connection.close()

    threading.Thread(target=hang_up, daemon=True).start()


def worker_checking_in(port: int, host: str) -> None:
    """A worker that checks in at last as `host`, then hangs up (nothing listens any more: nothing happens)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            connection.sendall((json.dumps({"type": "hello", "host": host, "version": __version__}) + "\n").encode())
    except OSError:
        pass

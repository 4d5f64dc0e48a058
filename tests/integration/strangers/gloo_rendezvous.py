"""A stranger on the job's network (another container on it, the public image in hand) that writes to Horovod's Gloo
rendezvous store on the master while the job starts: every rank's address in every scope of a 2 hosts x 2 ranks job
overwritten with its own, and the scopes deleted, over and over, from the moment the store listens until it is gone
(the job's mpirun ended) or for at most 150 s. Unguarded, Horovod's store takes it all. Prints what it was answered.

usage: python gloo_rendezvous.py MASTER PORT"""

import collections
import http.client
import socket
import sys
import time

master, port = sys.argv[1], int(sys.argv[2])
SCOPES = ("global", "local_host-0", "local_host-1", "cross_0", "cross_1")  # Horovod's, for 2 hosts x 2 ranks
KEYS = ("0", "1", "2", "3")  # Gloo's: each rank's address under its rank in the scope
FORGED = b"\x00" * 64  # no rank's address


def request(address: str, method: str, path: str, body: bytes | None = None) -> str:
    """The answer's status, "closed" (connected, answered nothing) or "refused" (nothing listens there, or the
    master is gone)."""
    connection = http.client.HTTPConnection(address, port, timeout=2)
    try:
        connection.connect()
    except OSError:  # refused, unreachable, timed out
        return "refused"
    try:
        connection.request(method, path, body=body)
        return str(connection.getresponse().status)
    except (OSError, http.client.HTTPException):  # reset, broken pipe, closed before the status line
        return "closed"
    finally:
        connection.close()


deadline = time.monotonic() + 150
while True:
    try:
        address = socket.gethostbyname(master)  # once: the name goes when the master's container does
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit(f"stranger: {master} did not resolve")
        time.sleep(0.05)  # the job's network names it once its container runs; DNS has no change notification
print("stranger-address", socket.gethostbyname(socket.gethostname()), flush=True)
seen = collections.Counter()
try:
    while time.monotonic() < deadline:
        answers = [request(address, "PUT", f"/{scope}/{key}", FORGED) for scope in SCOPES for key in KEYS]
        answers += [request(address, "DELETE", f"/{scope}/{key}") for scope in SCOPES for key in KEYS]
        seen.update(answers)
        if set(answers) == {"refused"}:
            if seen["refused"] < sum(seen.values()):
                break  # it listened, and is gone: the job's start-up is long over
            time.sleep(0.05)  # not listening yet (the master opens it just before mpirun); nothing to await
finally:
    print("stranger", " ".join(f"{answer}={count}" for answer, count in sorted(seen.items())), flush=True)

"""A stranger on the job's network (another container on it, the public image in hand): it checks in with the
master's handshake port as somebody it is not, and prints what it learned, for the fault suite to judge.

usage: python stranger.py MASTER PORT HOST VERSION [--ready]
  --ready: after the master's answer, also send `ready` with a host key of its own (as a forged worker would)."""

import json
import socket
import sys
import time

master, port, host, version = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
deadline = time.monotonic() + 60
while True:
    try:
        sock = socket.create_connection((master, port), timeout=5)
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit(f"stranger: {master}:{port} did not listen within 60 s")
        time.sleep(0.1)  # the master is not listening yet; connect() has no way to wait for that
print("stranger-address", sock.getsockname()[0], flush=True)
lines = sock.makefile("r")
sock.sendall((json.dumps({"type": "hello", "host": host, "version": version}) + "\n").encode())
print("stranger-answer", lines.readline().strip(), flush=True)
if "--ready" in sys.argv:
    try:
        sock.sendall((json.dumps({"type": "ready", "host_key": "ssh-ed25519 AAAAstranger"}) + "\n").encode())
        print("stranger-then", lines.readline().strip(), flush=True)
    except OSError as error:
        print("stranger-then", error, flush=True)

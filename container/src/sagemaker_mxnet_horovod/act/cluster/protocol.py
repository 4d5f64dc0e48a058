"""The handshake between the master and each worker: JSON lines over TCP, the worker connecting to the master's
handshake port.

  worker -> {"type": "hello", "host": H, "version": V}
  master -> {"type": "key", "authorized_key": "ssh-ed25519 ..."}        (or {"type": "reject", "message"})
            The master believes a hello only from an address that H resolves to (master.py): any other is
            noise, rejected without a word about the job. A worker that checks in after the job has failed
            is rejected with the job's failure, for as long as the master lingers (LINGER_S).
  worker -> {"type": "ready", "host_key": "ssh-ed25519 ..."}             (or {"type": "error", "message"})
  master -> {"type": "heartbeat"} every HEARTBEAT_S while the job runs
  master -> {"type": "stop", "signal": N} when only the master was signalled: the worker signals its ranks
  worker -> {"type": "launched"} once mpirun's daemon (orted) runs on the worker
  worker -> {"type": "daemon_exited"} when that daemon is gone again (normal at the job's end; before
            then, mpirun waits for it forever: the master ends the job if mpirun has not within a grace)
  master -> {"type": "dump_stacks", "dump": NAME, "reason": "..."}: the worker writes its ranks' stacks to its
            own log and output/data/stacks/NAME/, and answers
  worker -> {"type": "stacks", "dump": NAME, "ranks": {"R": "stacks of rank R", ...}}
  worker -> {"type": "stacks_wanted", "reason": "..."} when the worker was asked for stacks (SIGUSR1, `train
            stacks`, a rank's progress watch): the master asks every host, this one included
  master -> {"type": "report_request"} once the job's process has ended
  worker -> {"type": "host_report", "report": {...}}: its memory at the job's start and end and its /dev/shm
            (diagnose/host_report.py), for the diagnosis and the end-of-job line
  master -> {"type": "done", "exit_code": N, "failure": "...", "user_failure": "..."}
  worker -> {"type": "bye", "user_failure": "..."}

A parameter-server job (backends/parameter_server/ps_run.py) runs no ssh: the master answers a verified hello with
  master -> {"type": "welcome"}                                          (instead of the key; no ready follows)
and while the job runs each host reports on its own processes, for the master to decide the job's outcome:
  worker -> {"type": "failed", "failure": "...", "exit_code": N}   one of its processes failed the job (the first)
  worker -> {"type": "workers_finished"}   all of its workers have finished (their script returned, or they exited 0)
  worker -> {"type": "workers_ended", "succeeded": B}   all of its worker processes have ended (B: all exited 0)
  worker -> {"type": "stopped", "signal": N}   it was stopped (SIGTERM): the master stops the job everywhere
The diagnosis's messages (dump_stacks/stacks, stacks_wanted, report_request/host_report) are the same; the
master asks for the hosts' reports once the verdict is known, before `done`.

user_failure: what the user's program wrote to that host's /opt/ml/output/failure during the job (or null),
so each host's failure file can show the text the user's program wrote on another host.
The per-job key never leaves the job: the master generates it, gives each worker the public half, and pins
each worker's freshly generated host key in its known_hosts, so ssh checks host keys strictly.
Every wait has a deadline and, when it expires, says what it waited for.
"""

from __future__ import annotations

import json
import select
import socket
import threading

from sagemaker_mxnet_horovod.core.exits import ClusterError

HEARTBEAT_S = 5.0
HEARTBEAT_TIMEOUT_S = 30.0  # a worker that hears nothing from the master for this long gives up
MESSAGE_TIMEOUT_S = 30.0  # one step of the handshake once connected


class Connection:
    """One peer's end of the handshake: whole messages out, whole messages in."""

    def __init__(self, sock: socket.socket, peer: str):
        self.sock, self.peer = sock, peer
        self.buffer = b""  # our own line buffer: a file object's breaks when a read times out
        self.send_lock = threading.Lock()

    def send(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        with self.send_lock:
            self.sock.sendall(data)

    def send_quietly(self, message: dict) -> None:
        """Send where a peer that is already gone changes nothing (the next receive, or its watcher, says so)."""
        try:
            self.send(message)
        except OSError:
            pass

    def receive(self, timeout: float | None) -> dict | None:
        """The next message, None on EOF; socket.timeout when nothing arrives in time."""
        self.sock.settimeout(timeout)
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            raise ClusterError(f"garbled handshake message from {self.peer}: {line[:80]!r}") from None
        if not isinstance(message, dict) or "type" not in message:
            raise ClusterError(f"unexpected handshake message from {self.peer}: {message!r}")
        return message

    def peer_closed(self) -> bool:
        """Whether the peer has closed its end (or reset it): this end would read EOF now."""
        try:
            if not select.select([self.sock], [], [], 0)[0]:
                return False
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

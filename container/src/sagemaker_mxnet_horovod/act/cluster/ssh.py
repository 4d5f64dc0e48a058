"""The job's own ssh: the master's per-job key pair, and each worker's sshd, which accepts that key only and
presents a host key generated for this job (the master pins it, so ssh checks host keys strictly)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from sagemaker_mxnet_horovod.core.exits import ClusterError

SSHD = "/usr/sbin/sshd"


def generate_key(path: Path) -> str:
    """An ed25519 key pair at path (private) and path.pub; returns the public key line."""
    for stale in (path, path.with_name(path.name + ".pub")):
        stale.unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sagemaker-cluster", "-f", str(path)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return path.with_name(path.name + ".pub").read_text().strip()


class Sshd:
    """sshd for one job: key-only, this job's authorized key, host key generated now, one address."""

    def __init__(self, run_dir: Path, listen_address: str | None, port: int = 22):
        self.run_dir, self.listen_address, self.port = run_dir, listen_address, port
        self.authorized = run_dir / "authorized_keys"
        self.process: subprocess.Popen | None = None
        self.host_key = ""

    def launch(self) -> None:
        """Generate this job's host key and start sshd with no authorized key yet (nobody can log in before
        authorize()), so sshd starts while the worker is still checking in with the master."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege separation directory
        self.authorized.unlink(missing_ok=True)
        self.authorized.touch(mode=0o600)
        self.host_key = generate_key(self.run_dir / "ssh_host_ed25519_key")
        argv = [
            SSHD, "-D", "-e",
            "-o", f"HostKey={self.run_dir}/ssh_host_ed25519_key",
            "-o", f"AuthorizedKeysFile={self.authorized}",
            "-o", f"PidFile={self.run_dir}/sshd.pid",
            "-o", "PasswordAuthentication=no",
            "-o", "KbdInteractiveAuthentication=no",
            "-o", "PermitRootLogin=prohibit-password",
            "-o", "LogLevel=ERROR",
        ]
        if self.listen_address:
            # Port is cumulative in sshd: pass it only inside ListenAddress, or it binds twice.
            argv += ["-o", f"ListenAddress={self.listen_address}:{self.port}"]
        else:
            argv += ["-o", f"Port={self.port}"]
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL)

    def authorize(self, authorized_key: str) -> None:
        """The job's public key; sshd reads the file at each login."""
        staged = self.authorized.with_name(self.authorized.name + ".new")
        staged.unlink(missing_ok=True)
        staged.touch(mode=0o600)
        staged.write_text(authorized_key + "\n")
        staged.replace(self.authorized)

    def wait_ready(self, deadline: float) -> str:
        """Wait until sshd answers with an SSH banner; returns the host public key."""
        address = self.listen_address or "127.0.0.1"
        while True:
            if self.process.poll() is not None:
                raise ClusterError(f"sshd exited with code {self.process.returncode} at start (see its log above)")
            try:
                with socket.create_connection((address, self.port), timeout=1) as probe:
                    if probe.recv(8).startswith(b"SSH-"):
                        probe.sendall(b"SSH-2.0-readiness-probe\r\n")  # so sshd logs no protocol error
                        return self.host_key
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ClusterError(f"sshd did not answer on {address}:{self.port} in time")
            time.sleep(0.05)  # sshd has no readiness notification without systemd; poll its port briefly

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()

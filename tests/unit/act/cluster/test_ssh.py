"""cluster/ssh.py: the job's key pair from the real ssh-keygen; sshd's authorized key swapped in whole, readable by
root only; sshd's readiness as its SSH banner on the port, and an sshd that exited named as such. sshd itself runs
in the image, across real containers (tests/integration, tests/faults)."""

import socket
import stat
import subprocess
import threading
import time

import pytest
from sagemaker_mxnet_horovod.act.cluster.ssh import Sshd, generate_key
from sagemaker_mxnet_horovod.core.exits import ClusterError


def test_a_fresh_ed25519_key_pair_each_time(tmp_path):
    first = generate_key(tmp_path / "id_ed25519")
    assert first.startswith("ssh-ed25519 ") and first.endswith(" sagemaker-cluster")
    assert stat.S_IMODE((tmp_path / "id_ed25519").stat().st_mode) == 0o600
    assert generate_key(tmp_path / "id_ed25519") != first  # a stale pair is replaced, not reused


def test_the_authorized_key_is_replaced_whole_and_private(tmp_path):
    sshd = Sshd(tmp_path, "127.0.0.1")
    sshd.authorize("ssh-ed25519 AAAAfirst sagemaker-cluster")
    sshd.authorize("ssh-ed25519 AAAAsecond sagemaker-cluster")
    assert sshd.authorized.read_text() == "ssh-ed25519 AAAAsecond sagemaker-cluster\n"
    assert stat.S_IMODE(sshd.authorized.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["authorized_keys"]  # no staged copy left behind


def banner_server(banner: bytes):
    """A listener that greets each connection as sshd does."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def serve():
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            client.sendall(banner)
            client.close()

    threading.Thread(target=serve, daemon=True).start()
    return server


def test_sshd_is_ready_when_its_port_answers_with_an_ssh_banner(tmp_path):
    server = banner_server(b"SSH-2.0-OpenSSH_9.2\r\n")
    sshd = Sshd(tmp_path, "127.0.0.1", port=server.getsockname()[1])
    sshd.process = subprocess.Popen(["sleep", "30"])  # sshd's process, still running
    sshd.host_key = "ssh-ed25519 AAAAhost sagemaker-cluster"
    try:
        assert sshd.wait_ready(time.monotonic() + 5) == "ssh-ed25519 AAAAhost sagemaker-cluster"
    finally:
        sshd.stop()
        server.close()
    assert sshd.process.poll() is not None  # stop() ended it


def test_an_sshd_that_exited_or_never_answers_is_named(tmp_path):
    sshd = Sshd(tmp_path, "127.0.0.1", port=1)
    sshd.process = subprocess.Popen(["sh", "-c", "exit 255"])
    sshd.process.wait()
    with pytest.raises(ClusterError, match=r"sshd exited with code 255 at start"):
        sshd.wait_ready(time.monotonic() + 5)
    server = banner_server(b"HTTP/1.1 400\r\n")  # something else on the port
    sshd = Sshd(tmp_path, "127.0.0.1", port=server.getsockname()[1])
    sshd.process = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(ClusterError, match=r"sshd did not answer on 127.0.0.1:\d+ in time"):
            sshd.wait_ready(time.monotonic() + 0.3)
    finally:
        sshd.stop()
        server.close()

"""cluster/protocol.py: whole messages over a real socket pair, however the bytes arrive; a peer that hangs up,
says nothing in time or sends what is not a message."""

import socket

import pytest
from sagemaker_mxnet_horovod.act.cluster.protocol import Connection
from sagemaker_mxnet_horovod.core.exits import ClusterError


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    yield Connection(ours, "10.0.0.2"), theirs
    ours.close()
    theirs.close()


def test_messages_arrive_whole_whatever_the_bytes_chunks(pair):
    connection, peer = pair
    peer.sendall(b'{"type": "hello", "host": "algo-2"}\n{"type": "re')
    assert connection.receive(5) == {"type": "hello", "host": "algo-2"}
    peer.sendall(b'ady", "host_key": "k"}\n')
    assert connection.receive(5) == {"type": "ready", "host_key": "k"}


def test_what_we_send_is_one_json_line(pair):
    connection, peer = pair
    connection.send({"type": "key", "authorized_key": "ssh-ed25519 AAAA"})
    assert peer.recv(100) == b'{"type": "key", "authorized_key": "ssh-ed25519 AAAA"}\n'


def test_a_peer_that_hangs_up_is_none_and_one_that_is_silent_times_out(pair):
    connection, peer = pair
    with pytest.raises(TimeoutError):
        connection.receive(0.05)
    peer.shutdown(socket.SHUT_WR)
    assert connection.receive(5) is None


@pytest.mark.parametrize("line,error", [
    (b"GET / HTTP/1.1\n", r"garbled handshake message from 10.0.0.2: b'GET / HTTP/1.1'"),
    (b'["hello"]\n', r"unexpected handshake message from 10.0.0.2: \['hello'\]"),
    (b'{"host": "algo-2"}\n', r"unexpected handshake message from 10.0.0.2: \{'host': 'algo-2'\}"),
])
def test_what_is_not_a_message_is_an_error_naming_the_peer(pair, line, error):
    connection, peer = pair
    peer.sendall(line)
    with pytest.raises(ClusterError, match=error):
        connection.receive(5)


def test_sending_quietly_to_a_peer_that_is_gone_raises_nothing(pair):
    connection, peer = pair
    peer.close()
    for _ in range(3):  # the first send may still reach the kernel's buffer; a later one meets the reset
        connection.send_quietly({"type": "heartbeat"})

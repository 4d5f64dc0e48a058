"""cluster/master.py, who a peer is: over real sockets on this host, with strangers connecting from another
loopback address (127.0.0.2: another container on the job's network). Noise (no worker of this job, a worker's
name from another address, another version from another address, garbage) is rejected with nothing about the
job, logged once, and the job goes on waiting for its real workers; a worker's own error fails it; a worker whose
link died checks in again; a worker late for a failed job learns why; a forged check-in during the job changes
nothing."""

import threading
import time

import pytest
from handshake_peers import JOB_KEY, checked_in_worker, connect_worker, free_port, gathering
from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.act.cluster.master import LINGER_S, Master

STRANGER = "127.0.0.2"


@pytest.fixture
def logged():
    return []


def make_master(tmp_path, logged, workers=("localhost",), addresses_of=None, timeout_s=10):
    extra = {"addresses_of": addresses_of} if addresses_of else {}
    return Master(tuple(workers), free_port(), "127.0.0.1", tmp_path, deadline=time.monotonic() + timeout_s,
                  log=logged.append, **extra)


@pytest.fixture
def master(tmp_path, logged):
    """A master expecting one worker, "localhost" (which resolves to 127.0.0.1 here), for 10 s."""
    master = make_master(tmp_path, logged)
    yield master
    master.closing = True
    if master.server:
        master.server.close()


def stranger_says(port: int, **hello) -> dict:
    """A client from another address: its hello and the master's answer."""
    stranger = connect_worker(port, source=STRANGER)
    stranger.send(type="hello", **hello)
    answer = stranger.receive()
    stranger.close()
    return answer


@pytest.mark.parametrize("hello,why", [
    ({"host": "algo-7", "version": __version__}, "not a worker of this job"),
    ({"host": "localhost", "version": __version__}, "localhost resolves to 127.0.0.1, not to this address"),
    ({"host": "localhost", "version": "0.0.1"}, "localhost resolves to 127.0.0.1, not to this address"),
    ({"host": "algo-7", "version": "0.0.1"}, "not a worker of this job"),
])
def test_noise_is_rejected_with_nothing_about_the_job_and_the_real_worker_still_gets_in(master, logged, hello, why):
    thread, outcome = gathering(master)
    for _ in range(2):  # the same claim twice: logged once
        assert stranger_says(master.port, **hello) == {"type": "reject",
                                                       "message": "127.0.0.2 is not a worker of this job"}
    worker = connect_worker(master.port)
    worker.send(type="hello", host="localhost", version=__version__)
    assert worker.receive() == {"type": "key", "authorized_key": JOB_KEY}
    worker.send(type="ready", host_key="ssh-ed25519 AAAAhostkey")
    thread.join(10)
    assert list(outcome["links"]) == ["localhost"]  # the job goes on: no error from the noise
    assert logged == [f"ignored a check-in from 127.0.0.2 (as {hello['host']!r}, launcher {hello['version']}): {why}"]
    assert (master.run_dir / "known_hosts").read_text() == "localhost ssh-ed25519 AAAAhostkey\n"
    worker.close()


def garbage(port: int) -> None:
    client = connect_worker(port, source=STRANGER)
    client.sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
    assert client.lines.readline() == ""  # closed without an answer
    client.close()


def test_garbage_or_silence_before_a_hello_is_no_claim_and_fails_nothing(master, logged):
    checked_in_worker(master, silent_clients=1, first=garbage).close()
    assert logged == [] and master.errors == []


def test_a_verified_workers_other_version_fails_the_job_naming_it(master):
    thread, outcome = gathering(master)
    worker = connect_worker(master.port)
    worker.send(type="hello", host="localhost", version="0.0.1")
    expected = (f"worker localhost runs launcher 0.0.1, master runs {__version__}: every host of a job must use "
                "the same image")
    assert worker.receive() == {"type": "reject", "message": expected}
    thread.join(10)
    assert outcome == {"error": expected}
    worker.close()


def test_a_claim_whose_name_never_resolves_cannot_be_checked_and_the_master_says_so_at_the_deadline(tmp_path, logged):
    master = make_master(tmp_path, logged, workers=("algo-2",), timeout_s=1)
    thread, outcome = gathering(master)
    why = "algo-2 does not resolve on the master within the peer timeout, so it cannot tell who this is"
    assert stranger_says(master.port, host="algo-2", version=__version__) == {"type": "reject", "message": why}
    thread.join(10)
    assert outcome["error"] == ("worker algo-2 checked in, but the master cannot resolve its name: host name "
                                "'algo-2' did not resolve within the peer timeout")
    assert logged == [f"ignored a check-in from 127.0.0.2 (as 'algo-2', launcher 0.1.0): {why}"]
    master.server.close()


def two_workers_on_loopback(tmp_path, logged, timeout_s=10):
    """algo-2 and algo-3, both resolving to 127.0.0.1 (as two containers' names would to theirs)."""
    return make_master(tmp_path, logged, workers=("algo-2", "algo-3"), addresses_of=lambda host: ("127.0.0.1",),
                       timeout_s=timeout_s)


def check_in(master, host):
    worker = connect_worker(master.port)
    worker.send(type="hello", host=host, version=__version__)
    assert worker.receive()["type"] == "key"
    worker.send(type="ready", host_key=f"ssh-ed25519 AAAA{host}")
    return worker


def linked(master, host):
    """host's check-in, once the master has linked it (gather() still waits for the other worker)."""
    worker = check_in(master, host)
    with master.cond:
        assert master.cond.wait_for(lambda: host in master.links, 10)
    return worker


def test_a_worker_whose_link_died_checks_in_again_and_replaces_it(tmp_path, logged):
    master = two_workers_on_loopback(tmp_path, logged)
    thread, outcome = gathering(master)
    first = linked(master, "algo-2")
    first.close()  # its link dies before the job starts (the worker's launcher restarted, say)
    again = check_in(master, "algo-2")
    algo3 = check_in(master, "algo-3")
    thread.join(10)
    assert sorted(outcome["links"]) == ["algo-2", "algo-3"]
    assert "worker algo-2 checked in again from 127.0.0.1; its earlier connection had closed" in logged
    for worker in (again, algo3):
        worker.close()
    master.server.close()


def test_a_second_check_in_while_the_first_link_lives_fails_the_job_as_that_workers_error(tmp_path, logged):
    master = two_workers_on_loopback(tmp_path, logged)
    thread, outcome = gathering(master)
    first = linked(master, "algo-2")
    second = connect_worker(master.port)
    second.send(type="hello", host="algo-2", version=__version__)
    assert second.receive()["type"] == "reject"
    thread.join(10)
    assert outcome["error"] == "host 'algo-2' (127.0.0.1) connected twice; workers: ['algo-2', 'algo-3']"
    for worker in (first, second):
        worker.close()
    master.server.close()


def test_a_worker_late_for_a_failed_job_is_told_why_and_a_stranger_is_not(tmp_path, logged):
    master = two_workers_on_loopback(tmp_path, logged, timeout_s=3)  # lingers until the peer deadline at most
    finished = threading.Thread(target=master.finish, args=(1, "cluster setup failed on master algo-1: worker "
                                                               "algo-3: sshd on algo-3 did not start: ..."))
    master.listen()
    finished.start()
    assert stranger_says(master.port, host="algo-2", version=__version__) == {
        "type": "reject", "message": "127.0.0.2 is not a worker of this job"}
    late = connect_worker(master.port)
    late.send(type="hello", host="algo-2", version=__version__)
    assert late.receive() == {"type": "reject", "message": "the job ended before algo-2 checked in: cluster setup "
                                                           "failed on master algo-1: worker algo-3: sshd on algo-3 "
                                                           "did not start: ..."}
    late.close()
    finished.join(LINGER_S)
    assert not finished.is_alive()  # bounded by the peer deadline: algo-3 never came back
    assert master.told == {"algo-2"}


def test_a_forged_check_in_during_the_job_changes_nothing(master, logged):
    lost = []
    master.on_worker_lost = lambda host, how: lost.append(host)
    worker = checked_in_worker(master)
    assert stranger_says(master.port, host="localhost", version=__version__)["type"] == "reject"
    assert logged == ["ignored a check-in from 127.0.0.2 (as 'localhost', launcher 0.1.0): localhost resolves to "
                      "127.0.0.1, not to this address"]
    worker.send(type="launched")
    assert master.wait_launched(time.monotonic() + 10) == []  # the real worker's link still works
    assert lost == [] and list(master.links) == ["localhost"]
    worker.close()

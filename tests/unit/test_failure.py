"""Failure reports: mpirun's output parsed into 'which rank, where, how', cause first, within 1024 chars."""

from sagemaker_mxnet_horovod.facts import parse_cgroup_cpu_limit, parse_default_route_interface
from sagemaker_mxnet_horovod.failure import (
    FAILURE_LIMIT,
    RankFailure,
    fit,
    parse_mpirun_failure,
    process_failure_message,
    rank_failure_message,
    write_failure,
)

NONZERO = """--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[41731,1],3]
  Exit code:    2
--------------------------------------------------------------------------""".splitlines()

SIGNALED = """--------------------------------------------------------------------------
mpirun noticed that process rank 1 with PID 0 on node 8c1f2a exited on signal 11 (Segmentation fault).
--------------------------------------------------------------------------""".splitlines()

LOST = """--------------------------------------------------------------------------
ORTE has lost communication with a remote daemon.

  HNP daemon   : [[5467,0],0] on node 8c1f2a
  Remote daemon: [[5467,0],1] on node algo-2

This is usually due to either a failure of the TCP network
connection to the node, or possibly an internal failure of
the daemon itself. We cannot recover from this failure, and
therefore will terminate the job.
--------------------------------------------------------------------------""".splitlines()

HOSTS = ("algo-1", "algo-1", "algo-2", "algo-2")


def test_parse_nonzero_exit():
    assert parse_mpirun_failure(NONZERO) == RankFailure(rank=3, host=None, exit_code=2)


def test_parse_signal():
    assert parse_mpirun_failure(SIGNALED) == RankFailure(rank=1, host="8c1f2a", signal_number=11)


def test_parse_lost_daemon():
    assert parse_mpirun_failure(LOST).lost_host == "algo-2"


def test_parse_nothing():
    assert parse_mpirun_failure(["hello"]) is None


def test_message_names_rank_host_code_and_error_line_first():
    stderr = {3: ["Traceback (most recent call last):", '  File "x.py", line 1', "ValueError: labels out of range"]}
    message = rank_failure_message(2, parse_mpirun_failure(NONZERO), HOSTS, stderr, NONZERO)
    first, *rest = message.splitlines()
    assert first == "rank 3 on algo-2 exited with code 2: ValueError: labels out of range"
    assert "Traceback (most recent call last):" in rest


SHUT_DOWN = ("mxnet.base.MXNetError: MXNetError: Horovod has been shut down. This was caused by an exception on "
             "one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks "
             "finished execution.")
FIRST_EXIT_RANK_0 = [line.replace("[[41731,1],3]", "[[41731,1],0]").replace("Exit code:    2", "Exit code:    1")
                     for line in NONZERO]


def test_message_names_the_rank_that_failed_not_the_one_that_noticed():
    # Rank 0 reads Horovod's shutdown before rank 1's own exit reaches mpirun: rank 1 is the cause.
    stderr = {0: ["Traceback (most recent call last):", SHUT_DOWN],
              2: ["Traceback (most recent call last):", "ValueError: rank 2 was asked to fail"]}
    message = rank_failure_message(1, parse_mpirun_failure(FIRST_EXIT_RANK_0), HOSTS, stderr, FIRST_EXIT_RANK_0)
    first, *rest = message.splitlines()
    assert first.startswith("rank 2 on algo-2 failed: ValueError: rank 2 was asked to fail "
                            "(then rank 0 on algo-1 exited with code 1: mxnet.base.MXNetError: MXNetError: Horovod")
    assert len(first) < 250
    assert rest[0] == "--- last lines of rank 2 stderr ---"


def test_message_keeps_the_reported_rank_when_no_other_has_a_cause():
    stderr = {0: [SHUT_DOWN], 1: ["", "  "], 2: ["--------------------------------------------------------------",
                                                  "An MPI communication peer process has unexpectedly disconnected."]}
    message = rank_failure_message(1, parse_mpirun_failure(FIRST_EXIT_RANK_0), HOSTS, stderr, FIRST_EXIT_RANK_0)
    assert message.startswith("rank 0 on algo-1 exited with code 1: mxnet.base.MXNetError: MXNetError: Horovod has")


def test_message_uses_config_host_names_not_mpirun_node_names():
    message = rank_failure_message(139, parse_mpirun_failure(SIGNALED), HOSTS, {}, SIGNALED)
    assert message.startswith("rank 1 on algo-1 was killed by SIGSEGV")


def test_message_for_lost_host():
    message = rank_failure_message(1, parse_mpirun_failure(LOST), HOSTS, {}, LOST)
    assert message.startswith("lost contact with host algo-2: its MPI daemon died")


def test_message_without_named_rank_uses_first_rank_with_stderr_then_mpirun():
    message = rank_failure_message(1, None, HOSTS, {2: ["", "RuntimeError: boom"]}, [])
    assert message.startswith("mpirun exited with code 1; rank 2 on algo-2 reported: RuntimeError: boom")
    message = rank_failure_message(255, None, HOSTS, {}, ["-----", "ssh: Could not resolve hostname algo-2", "x"])
    assert message.startswith("mpirun exited with code 255: ssh: Could not resolve hostname algo-2")


def test_fit_keeps_cause_and_newest_detail():
    message = "rank 0 on algo-1 exited with code 1: boom\n" + "\n".join(f"line {i}" for i in range(500))
    text = fit(message)
    assert len(text) <= FAILURE_LIMIT
    assert text.startswith("rank 0 on algo-1 exited with code 1: boom\n...\n")
    assert text.endswith("line 499")
    assert fit("x" * 5000).endswith("...") and len(fit("x" * 5000)) == FAILURE_LIMIT


def test_write_failure_is_atomic_and_bounded(tmp_path):
    path = tmp_path / "output" / "failure"
    write_failure(path, "cause\n" + "y" * 4000)
    text = path.read_text()
    assert text.startswith("cause") and len(text) <= FAILURE_LIMIT + 1
    assert [p.name for p in path.parent.iterdir()] == ["failure"]


ROUTE = """Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth1\t0011A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth0\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0
"""


def test_default_route_interface():
    assert parse_default_route_interface(ROUTE) == "eth0"
    assert parse_default_route_interface(ROUTE.splitlines()[0]) is None


def test_cgroup_cpu_limit():
    assert parse_cgroup_cpu_limit("max 100000", None, None) is None
    assert parse_cgroup_cpu_limit("150000 100000", None, None) == 2
    assert parse_cgroup_cpu_limit(None, "-1", "100000") is None
    assert parse_cgroup_cpu_limit(None, "400000", "100000") == 4


def test_process_failure_message():
    message = process_failure_message("train.py", "algo-1", -9, ["loading", "Killed"])
    assert message.splitlines()[0] == "train.py on algo-1 was killed by SIGKILL: Killed"
    assert process_failure_message("mnist", "algo-1", 2, []) == "mnist on algo-1 exited with code 2"


def test_nvidia_facts_parsers():
    from sagemaker_mxnet_horovod.facts import parse_gpu_query, parse_nvidia_driver_version

    text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\nGCC version: x"
    assert parse_nvidia_driver_version(text) == "535.104.05"
    assert parse_nvidia_driver_version(None) is None
    assert parse_gpu_query("Tesla V100-SXM2-16GB, 7.0\nNVIDIA H100 80GB HBM3, 9.0\n") == (
        ("Tesla V100-SXM2-16GB", "7.0"), ("NVIDIA H100 80GB HBM3", "9.0"))
    assert parse_gpu_query("No devices were found") == ()

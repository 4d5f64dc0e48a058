"""host_facts.py: what the planner learns about the host. The parsers on captured text; gather() on this machine."""

import os
import socket

from sagemaker_mxnet_horovod.parse.host_facts import (
    gather,
    parse_cgroup_cpu_limit,
    parse_default_route_interface,
    parse_gpu_query,
    parse_nvidia_driver_version,
    shm_space,
)

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


def test_nvidia_facts_parsers():
    text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\nGCC version: x"
    assert parse_nvidia_driver_version(text) == "535.104.05"
    assert parse_nvidia_driver_version(None) is None
    assert parse_gpu_query("Tesla V100-SXM2-16GB, 7.0\nNVIDIA H100 80GB HBM3, 9.0\n") == (
        ("Tesla V100-SXM2-16GB", "7.0"), ("NVIDIA H100 80GB HBM3", "9.0"))
    assert parse_gpu_query("No devices were found") == ()


def test_gather_reads_this_machine():
    facts = gather({"SM_NUM_GPUS": "0"})
    assert (facts.gpu_count, facts.gpus, facts.nvidia_driver_version) == (0, (), None)
    assert facts.hostname == socket.gethostname()
    assert "lo" not in facts.interfaces
    assert facts.default_route_interface in (None, *facts.interfaces)
    assert ("lo", "127.0.0.1") in facts.interface_addresses
    assert {name for name, _ in facts.interface_addresses} <= {name for _, name in socket.if_nameindex()}


def test_the_cpu_count_is_the_cores_this_process_may_run_on():
    # This thread pinned to one core, then to two, while it counts (a test machine's host has no CPU quota, which
    # would lower the count to the quota).
    saved = os.sched_getaffinity(0)
    assert len(saved) >= 2, "this test needs a machine with 2 cores"
    try:
        for cores in (1, 2):
            os.sched_setaffinity(0, sorted(saved)[:cores])
            assert gather({"SM_NUM_GPUS": "0"}).cpu_count == cores
    finally:
        os.sched_setaffinity(0, saved)


def test_the_environments_gpu_count_wins_and_skips_the_gpu_query():
    # SageMaker sets SM_NUM_GPUS: the count is the platform's, and nvidia-smi (seconds at start) is not asked.
    facts = gather({"SM_NUM_GPUS": "2"})
    assert (facts.gpu_count, facts.gpus) == (2, ())


def test_dev_shm_size_is_the_filesystems(tmp_path):
    stats = os.statvfs("/dev/shm")
    assert gather({"SM_NUM_GPUS": "0"}).shm_bytes == shm_space()[0] == stats.f_blocks * stats.f_frsize > 0
    assert shm_space(str(tmp_path / "none")) is None


def test_dev_shm_free_space_on_a_partly_filled_tmpfs(tmpfs_64m):
    assert shm_space(str(tmpfs_64m)) == (64 << 20, 64 << 20)
    with open(tmpfs_64m / "another-process", "wb") as file:  # 40 MiB of someone else's (tmpfs: whole pages)
        file.write(b"\1" * (40 << 20))
    assert shm_space(str(tmpfs_64m)) == (64 << 20, 24 << 20)

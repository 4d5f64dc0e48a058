"""What the planner needs to know about this host: cores, GPUs, network interfaces, the size of /dev/shm.

`gather()` reads the system; the parsers it uses are pure and unit-tested on captured text.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class HostFacts:
    cpu_count: int
    gpu_count: int = 0
    interfaces: tuple[str, ...] = ()  # interfaces that exist, loopback excluded
    default_route_interface: str | None = None
    interface_addresses: tuple[tuple[str, str], ...] = ()  # (interface, IPv4) pairs
    hostname: str = "localhost"  # the container's own name: SDK local mode makes it the container id
    nvidia_driver_version: str | None = None  # e.g. "535.104.05"
    gpus: tuple[tuple[str, str], ...] = ()  # (name, compute capability "8.0") per visible GPU
    shm_bytes: int | None = None  # the size of /dev/shm (None: there is none)
    shm_free_bytes: int | None = None  # what is free of it at the start: a tmpfs shared with others may be in use

    def address_of(self, interface: str | None) -> str:
        """This host's IPv4 address on the interface, where its servers bind ("" when it has none: every address)."""
        return next((ip for name, ip in self.interface_addresses if name == interface), "")


def parse_default_route_interface(proc_net_route: str) -> str | None:
    """The interface of the IPv4 default route in /proc/net/route text (destination 00000000, mask 0)."""
    best = None
    for line in proc_net_route.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        interface, destination, mask = fields[0], fields[1], fields[7]
        if destination == "00000000" and mask == "00000000":
            metric = int(fields[6]) if fields[6].isdigit() else 0
            if best is None or metric < best[0]:
                best = (metric, interface)
    return best[1] if best else None


def parse_cgroup_cpu_limit(cpu_max: str | None, cfs_quota: str | None, cfs_period: str | None) -> int | None:
    """Whole CPUs allowed by a cgroup v2 cpu.max or v1 cfs quota/period; None when unlimited."""
    quota = period = None
    if cpu_max:
        parts = cpu_max.split()
        if len(parts) == 2 and parts[0] != "max":
            quota, period = int(parts[0]), int(parts[1])
    elif cfs_quota and cfs_period and int(cfs_quota) > 0:
        quota, period = int(cfs_quota), int(cfs_period)
    if quota is None or not period:
        return None
    return max(1, -(-quota // period))  # round up: 1.5 CPUs still runs two threads usefully


def parse_nvidia_driver_version(proc_version: str | None) -> str | None:
    """The kernel module version from /proc/driver/nvidia/version ("NVRM version: ... Module  535.104.05 ...")."""
    match = re.search(r"Kernel Module\s+(\d+(?:\.\d+)+)", proc_version or "")
    return match.group(1) if match else None


def parse_gpu_query(csv_text: str) -> tuple[tuple[str, str], ...]:
    """`nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader` output."""
    gpus = []
    for line in csv_text.splitlines():
        name, _, capability = line.rpartition(",")
        if name.strip() and re.fullmatch(r"\d+\.\d+", capability.strip()):
            gpus.append((name.strip(), capability.strip()))
    return tuple(gpus)


def query_gpus() -> tuple[tuple[str, str], ...]:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return parse_gpu_query(done.stdout) if done.returncode == 0 else ()


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def count_cpus() -> int:
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        affinity = os.cpu_count() or 1
    limit = parse_cgroup_cpu_limit(
        _read("/sys/fs/cgroup/cpu.max"),
        _read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
        _read("/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
    )
    return min(affinity, limit) if limit else affinity


def count_gpus() -> int:
    """NVIDIA GPUs visible to this container: the driver lists one directory per device it exposes."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def interface_ipv4_addresses() -> tuple[tuple[str, str], ...]:
    """(interface, address) for every IPv4 address, via the SIOCGIFADDR ioctl (no iproute2 needed)."""
    import fcntl
    import struct

    pairs = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on it
            pairs.append((name, socket.inet_ntoa(packed[20:24])))
    return tuple(pairs)


def shm_space(path: str = "/dev/shm") -> tuple[int, int] | None:
    """(size, free bytes) of the filesystem at /dev/shm (Docker's default size: 64 MiB), None when there is none.
    Free is what a process may still write (f_bavail): less than the size where files are there already, as on a
    host's own /dev/shm shared with other containers (docker run --ipc=host)."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return None
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


def gather(env: dict | None = None) -> HostFacts:
    env = os.environ if env is None else env
    try:
        names = tuple(sorted(n for n in os.listdir("/sys/class/net") if n != "lo"))
    except OSError:
        names = ()
    gpus = int(env["SM_NUM_GPUS"]) if env.get("SM_NUM_GPUS", "").isdigit() else count_gpus()
    shm_bytes, shm_free_bytes = shm_space() or (None, None)
    return HostFacts(
        cpu_count=count_cpus(),
        gpu_count=gpus,
        interfaces=names,
        default_route_interface=parse_default_route_interface(_read("/proc/net/route") or ""),
        interface_addresses=interface_ipv4_addresses(),
        hostname=socket.gethostname(),
        nvidia_driver_version=parse_nvidia_driver_version(_read("/proc/driver/nvidia/version")) if gpus else None,
        gpus=query_gpus() if gpus and "SM_NUM_GPUS" not in env else (),
        shm_bytes=shm_bytes,
        shm_free_bytes=shm_free_bytes,
    )

"""Emulated instance links between local containers: a token-bucket rate limit (`tc qdisc ... tbf`) on eth0
inside each container's network namespace, entered from the host with nsenter. Each host's sending rate is
capped, as an instance's NIC caps it; what the others send it is capped by their own limit.

The rate comes from a stated ratio, not from a fixed bandwidth, so that the emulation does not depend on
this machine's speed: a link of ratio R moves the bytes a host sends in one step in R x one step's compute
(`rate_for`). tbf counts whole frames (Ethernet, IP and TCP headers included): a TCP stream gets ~96% of the
rate as payload (1434 of 1500 Mbit/s measured here, no drops with the burst and queue below), as on a
real link of that nominal rate.

Left out: latency (netem is not in these kernels; the veth adds ~0.05 ms), several NICs or queues per host,
and (unless asked for with `FlowCapped`) the per-flow limits of real networks (EC2 caps a single TCP flow at 5
Gbit/s, 10 within a cluster placement group, below the instance's bandwidth); and
everything a GPU host's NCCL does differently from Open MPI over TCP.
"""

from __future__ import annotations

import os
import shutil
import subprocess

BURST_S = 0.001  # the bucket holds 1 ms of the rate (at least 64 KiB: one GSO frame must fit)
QUEUE_MS = 10  # default: how long a frame may wait for tokens before tbf drops it
TCP_PAYLOAD_SHARE = 1448 / 1514  # payload per full Ethernet frame with TCP timestamps: what tbf leaves to data


class LinkError(RuntimeError):
    pass


def require_tc() -> None:
    """Refuse, saying why, where the host cannot shape a container's link."""
    missing = [tool for tool in ("tc", "nsenter") if not shutil.which(tool)]
    if missing:
        raise LinkError(f"emulated links need {' and '.join(missing)} on the host (Debian: iproute2, util-linux)")
    if os.geteuid() != 0:
        raise LinkError("emulated links need root: tc runs in each container's network namespace via nsenter")


def rate_for(ratio: float, bytes_per_step: float, compute_s: float) -> float:
    """The link's rate in bits per second at which a host's bytes of one step take `ratio` x `compute_s`. As for
    a NIC's nominal rate, the frames' headers are part of it (AWS's figures divide bytes by nominal rates too)."""
    return bytes_per_step * 8 / (ratio * compute_s)


def ring_bytes_per_host(gradient_bytes: float, ranks: int) -> float:
    """What each host sends per allreduce of `gradient_bytes` in a ring over `ranks` ranks, one per host (a
    reduce-scatter and an allgather, each moving (N-1)/N of the data); 2 ranks exchange it once each way."""
    return 2 * (ranks - 1) / ranks * gradient_bytes


def _in_namespace(namespace: int | str, *argv: str) -> subprocess.CompletedProcess:
    """Run argv in a network namespace: a process's (its pid) or a named one's file (/run/netns/NAME, `ip netns`)."""
    enter = ["-t", str(namespace), "-n"] if isinstance(namespace, int) else [f"--net={namespace}"]
    return subprocess.run(["nsenter", *enter, *argv], capture_output=True, text=True, check=False)


def container_pid(docker: str, cid: str) -> int:
    pid = subprocess.run([docker, "inspect", "-f", "{{.State.Pid}}", cid], capture_output=True, text=True,
                         check=False).stdout.strip()
    if not pid.isdigit() or pid == "0":
        raise LinkError(f"container {cid[:12]} is not running: no network namespace to shape")
    return int(pid)


def shape(namespace: int | str, rate_bps: float, device: str = "eth0", queue_ms: float = QUEUE_MS) -> str:
    """Cap what the network namespace (a pid's, or a file's: _in_namespace) sends on `device` at `rate_bps`, frames
    waiting at most `queue_ms` for their turn; returns tc's view of the qdisc."""
    burst = max(int(rate_bps / 8 * BURST_S), 64 * 1024)
    added = _in_namespace(namespace, "tc", "qdisc", "replace", "dev", device, "root", "tbf", "rate", f"{int(rate_bps)}bit",
                          "burst", str(burst), "latency", f"{queue_ms:g}ms")
    if added.returncode != 0:
        raise LinkError(f"tc could not add a tbf qdisc on {device} in {namespace}'s namespace: "
                        f"{added.stderr.strip()}")
    return qdisc(namespace, device)


ALLOWED_CONGESTION_CONTROL = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
AVAILABLE_CONGESTION_CONTROL = "/proc/sys/net/ipv4/tcp_available_congestion_control"


def congestion_control_problem(algorithms, allowed: str, available: str) -> str | None:
    """Why `algorithms` cannot be set in a container's namespace, with the one command that fixes it, or None.
    Outside the host's own namespace Linux sets only the algorithms of the allowed list (EPERM otherwise: some
    kernels allow "reno bbr" only), and only loaded ones."""
    wanted = list(dict.fromkeys(algorithms))
    unloaded = [a for a in wanted if a not in available.split()]
    if unloaded:
        modules = " ".join(f"tcp_{a}" for a in unloaded)
        return (f"TCP congestion control {', '.join(unloaded)} is not available on this kernel "
                f"(available: {available.strip()}): load it as root with `modprobe -a {modules}`")
    missing = [a for a in wanted if a not in allowed.split()]
    if missing:
        fixed = " ".join([*allowed.split(), *missing])
        return (f"this kernel lets a container's namespace use only \"{allowed.strip()}\" "
                f"(net.ipv4.tcp_allowed_congestion_control), not {', '.join(missing)}: allow it as root with "
                f"`sysctl -w net.ipv4.tcp_allowed_congestion_control=\"{fixed}\"`")
    return None


def require_congestion_controls(algorithms) -> None:
    """Refuse, before any job starts, algorithms that set_congestion_control would fail to set."""
    with open(ALLOWED_CONGESTION_CONTROL) as allowed, open(AVAILABLE_CONGESTION_CONTROL) as available:
        problem = congestion_control_problem(algorithms, allowed.read(), available.read())
    if problem:
        raise LinkError(problem)


def set_congestion_control(namespace: int | str, algorithm: str) -> None:
    """TCP's congestion control for the connections the network namespace opens from now on (a per-namespace
    sysctl, read from the namespace of whoever opens the file: hence nsenter)."""
    done = _in_namespace(namespace, "sh", "-c", f"echo {algorithm} > /proc/sys/net/ipv4/tcp_congestion_control")
    if done.returncode != 0:
        raise LinkError(f"could not set TCP congestion control {algorithm} in {namespace}'s namespace: "
                        f"{done.stderr.strip()}")


def qdisc(namespace: int | str, device: str = "eth0") -> str:
    return _in_namespace(namespace, "tc", "-s", "qdisc", "show", "dev", device).stdout.strip()


def unshape(pid: int, device: str = "eth0") -> None:
    """Remove the qdisc (a container's namespace takes it along when it goes; this is for one that stays)."""
    _in_namespace(pid, "tc", "qdisc", "del", "dev", device, "root")


class FlowCapped:
    """A link whose every TCP connection is also capped at `flow_bps`, as EC2 caps a single flow (5 Gbit/s, or
    10 within a cluster placement group) below an instance's bandwidth: htb, one class per connection under the
    link's class. Connections are found as they open (`classify_new`, to be called every few ms: no event tells
    a new connection); until its class exists a connection's frames share one class of the same cap."""

    def __init__(self, pid: int, rate_bps: float, flow_bps: float, device: str = "eth0", queue_ms: float = QUEUE_MS):
        self.pid, self.device, self.flow_bps, self.queue_ms, self.classes = pid, device, flow_bps, queue_ms, {}
        burst = max(int(rate_bps / 8 * BURST_S), 64 * 1024)
        self._tc("qdisc", "replace", "dev", device, "root", "handle", "1:", "htb", "default", "2")
        self._tc("class", "add", "dev", device, "parent", "1:", "classid", "1:1", "htb", "rate", f"{int(rate_bps)}bit",
                 "ceil", f"{int(rate_bps)}bit", "burst", str(burst), "cburst", str(burst), "quantum", "65536")
        self._add_class("1:2")

    def _tc(self, *argv: str) -> None:
        done = _in_namespace(self.pid, "tc", *argv)
        if done.returncode != 0:
            raise LinkError(f"tc {' '.join(argv)} in pid {self.pid}'s namespace: {done.stderr.strip()}")

    def _add_class(self, classid: str) -> None:
        burst = max(int(self.flow_bps / 8 * BURST_S), 64 * 1024)
        self._tc("class", "add", "dev", self.device, "parent", "1:1", "classid", classid, "htb", "rate", "1mbit",
                 "ceil", f"{int(self.flow_bps)}bit", "burst", str(burst), "cburst", str(burst), "quantum", "65536")
        limit = max(int(self.flow_bps / 8 * self.queue_ms / 1000), 2 * 64 * 1024)  # a queue as deep as tbf's
        self._tc("qdisc", "add", "dev", self.device, "parent", classid, "bfifo", "limit", str(limit))

    def connections(self) -> set:
        """(local port, remote port) of the namespace's established IPv4 TCP connections."""
        try:
            lines = open(f"/proc/{self.pid}/net/tcp").read().splitlines()[1:]
        except OSError:
            return set()
        found = set()
        for line in lines:
            local, remote, state = line.split()[1:4]
            if state == "01" and not local.startswith("0100007F"):
                found.add((int(local.split(":")[1], 16), int(remote.split(":")[1], 16)))
        return found

    def classify_new(self) -> None:
        """Give every connection opened since the last call its own capped class."""
        for local_port, remote_port in sorted(self.connections() - set(self.classes)):
            classid = f"1:{16 + len(self.classes):x}"
            self._add_class(classid)
            self._tc("filter", "add", "dev", self.device, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                     "match", "ip", "sport", str(local_port), "0xffff", "match", "ip", "dport", str(remote_port),
                     "0xffff", "flowid", classid)
            self.classes[(local_port, remote_port)] = classid

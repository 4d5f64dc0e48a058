"""This host's memory as the container's cgroup accounts it: its limit, its peak usage and the OOM killer's kills.

A rank killed by SIGKILL on a host whose cgroup recorded an OOM kill during the job ran out of memory: the
failure file says so with the limit and the peak (verdict.out_of_memory), and every job's end-of-job line
gives each host's peak. The kernel counts a process of the cgroup killed by any OOM killer, the container's
own limit or the whole host's (cgroup v2 memory.events oom_kill; v1 memory.oom_control oom_kill, kernel 4.13
and later; older v1 kernels only count how often usage hit the limit, memory.failcnt).

cgroup v2: memory.max, memory.peak (kernel 5.19 and later), memory.events. cgroup v1: memory.limit_in_bytes,
memory.max_usage_in_bytes, memory.oom_control, memory.failcnt. Usage includes the page cache, so a peak near
the limit alone is no sign of trouble: the kernel reclaims cache before it kills. The parsers are pure and
unit-tested on captured files of both versions; read_memory() reads the running container's.

A reading also holds what is free of /dev/shm, a tmpfs (memory): taken at the job's start, it is what others left
the job there (a host's /dev/shm shared with other containers can be large and nearly full), which a reading at the
end cannot tell from the files the job's own dead processes left (diagnose/shm.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from sagemaker_mxnet_horovod.parse.host_facts import shm_space

CGROUP_ROOT = Path("/sys/fs/cgroup")
MEMINFO = Path("/proc/meminfo")
# cgroup v1 writes "no limit" as the largest page-aligned counter (9223372036854771712 on 4 KiB pages).
V1_UNLIMITED_FROM = 1 << 62


@dataclass(frozen=True)
class MemoryReading:
    """One reading of the container's memory accounting; None where this kernel or cgroup version has no value."""

    limit_bytes: int | None = None  # the container's limit; None: no limit (the host's RAM is)
    peak_bytes: int | None = None  # highest usage so far, page cache included
    oom_kills: int | None = None  # processes of this container killed by an OOM killer
    limit_hits: int | None = None  # v1 memory.failcnt: how often usage reached the limit
    ram_bytes: int | None = None  # the host's RAM (MemTotal)
    shm_free_bytes: int | None = None  # free in /dev/shm; None: there is none

    def to_message(self) -> dict:
        return asdict(self)

    @classmethod
    def from_message(cls, data: object) -> MemoryReading:
        """From to_message()'s dict (a worker's report); what is missing or not a number stays None."""
        values = data if isinstance(data, dict) else {}
        return cls(**{name: value if isinstance(value, int) and not isinstance(value, bool) else None
                      for name, value in ((name, values.get(name)) for name in cls.__dataclass_fields__)})

    @property
    def ceiling_bytes(self) -> int | None:
        """What the processes could use: the container's limit, else the host's RAM."""
        return self.limit_bytes if self.limit_bytes is not None else self.ram_bytes

    def describe_ceiling(self) -> str:
        if self.limit_bytes is not None:
            return f"container limit {size_text(self.limit_bytes)}"
        if self.ram_bytes is not None:
            return f"no container limit, {size_text(self.ram_bytes)} of RAM"
        return "no container limit"

    def describe_peak(self) -> str:
        """'1.2 GiB of 3.7 GiB': the peak and what it could reach."""
        peak = size_text(self.peak_bytes) if self.peak_bytes is not None else "peak not recorded"
        ceiling = self.ceiling_bytes
        return peak + (f" of {size_text(ceiling)}" if ceiling is not None else "")


def oom_during(before: MemoryReading, after: MemoryReading) -> bool:
    """Whether the OOM killer killed a process of this container between the two readings. Where the kernel does
    not count kills (v1 before 4.13), usage reaching the limit is the best evidence there is."""
    if before.oom_kills is not None and after.oom_kills is not None:
        return after.oom_kills > before.oom_kills
    if before.limit_hits is not None and after.limit_hits is not None:
        return after.limit_hits > before.limit_hits
    return False


def size_text(size: int) -> str:
    """Bytes as people read them: '64 MiB', '3.7 GiB'."""
    value, units = float(size), ("B", "KiB", "MiB", "GiB", "TiB")
    for unit in units:
        if value < 1024 or unit == units[-1]:
            break
        value /= 1024
    number = f"{value:.0f}" if value >= 100 else f"{value:.1f}".removesuffix(".0")
    return f"{number} {unit}"


def _number(text: str | None) -> int | None:
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def _keyed(text: str | None) -> dict[str, int]:
    """'key value' lines (memory.events, memory.oom_control, /proc/meminfo's 'MemTotal: N kB')."""
    values = {}
    for line in (text or "").splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[1].isdigit():
            values[parts[0]] = int(parts[1])
    return values


def parse_v2(memory_max: str | None, memory_peak: str | None, memory_events: str | None) -> MemoryReading:
    events = _keyed(memory_events)
    limit = None if (memory_max or "").strip() in ("", "max") else _number(memory_max)
    return MemoryReading(limit_bytes=limit, peak_bytes=_number(memory_peak),
                         oom_kills=events.get("oom_kill") if memory_events is not None else None)


def parse_v1(limit_in_bytes: str | None, max_usage_in_bytes: str | None, oom_control: str | None,
             failcnt: str | None) -> MemoryReading:
    limit = _number(limit_in_bytes)
    return MemoryReading(limit_bytes=None if limit is None or limit >= V1_UNLIMITED_FROM else limit,
                         peak_bytes=_number(max_usage_in_bytes), oom_kills=_keyed(oom_control).get("oom_kill"),
                         limit_hits=_number(failcnt))


def parse_ram_bytes(meminfo: str | None) -> int | None:
    kib = _keyed(meminfo).get("MemTotal")
    return kib * 1024 if kib is not None else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def read_memory(root: Path = CGROUP_ROOT, meminfo: Path = MEMINFO, shm: str = "/dev/shm") -> MemoryReading:
    """The container's reading now: cgroup v2 when its memory files are there, else v1's memory controller; and
    /dev/shm's free space."""
    if (root / "memory.max").exists() or (root / "memory.events").exists():
        reading = parse_v2(_read(root / "memory.max"), _read(root / "memory.peak"), _read(root / "memory.events"))
    else:
        v1 = root / "memory"
        reading = parse_v1(_read(v1 / "memory.limit_in_bytes"), _read(v1 / "memory.max_usage_in_bytes"),
                           _read(v1 / "memory.oom_control"), _read(v1 / "memory.failcnt"))
    space = shm_space(shm)
    return MemoryReading(**{**asdict(reading), "ram_bytes": parse_ram_bytes(_read(meminfo)),
                            "shm_free_bytes": space[1] if space else None})

"""memory.py: the container's memory accounting from cgroup v1 and v2 files. v1's are captured from a container of
this machine's Docker (cgroup v1, Linux 6.18, `docker run --memory=256m --memory-swap=256m`) before and after a
process in it was OOM-killed (this kernel left memory.failcnt at 0). This machine has no cgroup v2, so v2's are
written in the format the kernel documents (Documentation/admin-guide/cgroup-v2.rst: memory.max "max" or bytes,
memory.peak bytes, memory.events "key count" lines), and the v1 kernel older than 4.13 (no oom_kill line) is
made from the captured file without it."""

import os
import re
from pathlib import Path

from sagemaker_mxnet_horovod.diagnose.memory import (
    MemoryReading,
    oom_during,
    parse_v1,
    parse_v2,
    read_memory,
    size_text,
)

MIB = 1 << 20
V1_BEFORE = {"memory.limit_in_bytes": "268435456\n", "memory.max_usage_in_bytes": "4329472\n",
             "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n", "memory.failcnt": "0\n"}
V1_AFTER = {"memory.limit_in_bytes": "268435456\n", "memory.max_usage_in_bytes": "268435456\n",
            "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n", "memory.failcnt": "0\n"}
V1_UNLIMITED = "9223372036854771712\n"
V2_EVENTS_BEFORE = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"
V2_EVENTS_AFTER = "low 0\nhigh 0\nmax 1043\noom 1\noom_kill 1\noom_group_kill 0\n"
MEMINFO = "MemTotal:       24683656 kB\nMemFree:        20000000 kB\n"


def v1(files: dict) -> MemoryReading:
    return parse_v1(files["memory.limit_in_bytes"], files["memory.max_usage_in_bytes"], files["memory.oom_control"],
                    files["memory.failcnt"])


def test_cgroup_v1_limit_peak_and_oom_kills():
    assert v1(V1_AFTER) == MemoryReading(limit_bytes=256 * MIB, peak_bytes=256 * MIB, oom_kills=1, limit_hits=0)
    assert oom_during(v1(V1_BEFORE), v1(V1_AFTER))
    assert not oom_during(v1(V1_AFTER), v1(V1_AFTER))
    # No limit: the largest page-aligned counter.
    assert parse_v1(V1_UNLIMITED, "1000", V1_BEFORE["memory.oom_control"], "0").limit_bytes is None


def test_cgroup_v1_before_linux_4_13_counts_only_limit_hits():
    old_kernel = {**V1_AFTER, "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\n", "memory.failcnt": "2931\n"}
    before = {**V1_BEFORE, "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\n"}
    assert v1(old_kernel).oom_kills is None
    assert oom_during(v1(before), v1(old_kernel))  # the limit was hit: the best evidence there is


def test_cgroup_v2_limit_peak_and_oom_kills():
    after = parse_v2("268435456\n", "268431360\n", V2_EVENTS_AFTER)
    assert after == MemoryReading(limit_bytes=256 * MIB, peak_bytes=268431360, oom_kills=1)
    assert oom_during(parse_v2("268435456\n", "1024\n", V2_EVENTS_BEFORE), after)
    unlimited = parse_v2("max\n", None, V2_EVENTS_BEFORE)  # memory.peak: Linux 5.19 and later only
    assert (unlimited.limit_bytes, unlimited.peak_bytes, unlimited.oom_kills) == (None, None, 0)


def test_read_memory_finds_either_version_under_a_root(tmp_path):
    (tmp_path / "v1" / "memory").mkdir(parents=True)
    for name, text in V1_AFTER.items():
        (tmp_path / "v1" / "memory" / name).write_text(text)
    (tmp_path / "meminfo").write_text(MEMINFO)
    no_shm = str(tmp_path / "no-shm")
    assert read_memory(tmp_path / "v1", tmp_path / "meminfo", no_shm) == MemoryReading(256 * MIB, 256 * MIB, 1, 0,
                                                                                        24683656 * 1024)
    (tmp_path / "v2").mkdir()
    for name, text in (("memory.max", "max\n"), ("memory.peak", "5000\n"), ("memory.events", V2_EVENTS_AFTER)):
        (tmp_path / "v2" / name).write_text(text)
    assert read_memory(tmp_path / "v2", tmp_path / "meminfo", no_shm) == MemoryReading(None, 5000, 1, None,
                                                                                        24683656 * 1024)


def test_a_reading_holds_what_is_free_of_dev_shm(tmpfs_64m):
    # /dev/shm's free space at the job's start: what others left the job (diagnose/shm.py compares the need with it).
    assert read_memory(shm=str(tmpfs_64m)).shm_free_bytes == 64 * MIB
    (tmpfs_64m / "another-process").write_bytes(b"\1" * (40 * MIB))
    reading = read_memory(shm=str(tmpfs_64m))
    assert reading.shm_free_bytes == 24 * MIB
    assert MemoryReading.from_message(reading.to_message()) == reading  # as a worker's report sends it


def test_read_memory_reads_this_machine():
    reading = read_memory()
    assert reading.ram_bytes == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")  # the kernel's own count
    # The OOM killer's count as the kernel writes it for this process's cgroup (v2's memory.events at the cgroup
    # mount; v1's memory controller), None where neither has one (a v2 host's root cgroup).
    cgroup = Path("/sys/fs/cgroup")
    counts = next((path.read_text() for path in (cgroup / "memory.events", cgroup / "memory" / "memory.oom_control")
                   if path.exists()), "")
    kills = re.search(r"^oom_kill (\d+)$", counts, re.MULTILINE)
    assert reading.oom_kills == (int(kills.group(1)) if kills else None)


def test_ceiling_and_peak_read_as_people_say_them():
    limited = MemoryReading(limit_bytes=256 * MIB, peak_bytes=255 * MIB, ram_bytes=24 << 30)
    assert limited.describe_ceiling() == "container limit 256 MiB"
    assert limited.describe_peak() == "255 MiB of 256 MiB"
    host = MemoryReading(peak_bytes=int(3.7 * (1 << 30)), ram_bytes=16 << 30)
    assert (host.describe_ceiling(), host.describe_peak()) == ("no container limit, 16 GiB of RAM", "3.7 GiB of 16 GiB")
    assert MemoryReading().describe_peak() == "peak not recorded"
    assert [size_text(n) for n in (0, 1023, 1536, 64 * MIB, 100 * MIB, 123456789012)] == [
        "0 B", "1023 B", "1.5 KiB", "64 MiB", "100 MiB", "115 GiB"]


def test_a_reading_travels_as_a_message_and_a_bad_one_becomes_unknowns():
    reading = MemoryReading(256 * MIB, 200 * MIB, 1, None, 1 << 34)
    assert MemoryReading.from_message(reading.to_message()) == reading
    assert MemoryReading.from_message({"limit_bytes": "lots", "oom_kills": True, "x": 1}) == MemoryReading()
    assert MemoryReading.from_message(None) == MemoryReading()

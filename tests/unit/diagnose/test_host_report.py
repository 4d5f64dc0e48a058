"""host_report.py: what a host reports when the job ends (its memory at start and end, /dev/shm's size), the
line naming a host that ran out of memory, and the end-of-job line's peaks."""

import os
import shutil

from sagemaker_mxnet_horovod.diagnose.host_report import (
    REPORT_TIMEOUT_S,
    HostReport,
    every_host_report,
    oom_cause,
    peak_line,
    report_now,
)
from sagemaker_mxnet_horovod.diagnose.memory import MemoryReading, read_memory

MIB = 1 << 20
START = MemoryReading(limit_bytes=256 * MIB, peak_bytes=30 * MIB, oom_kills=0, ram_bytes=24 << 30)
OOM = MemoryReading(limit_bytes=256 * MIB, peak_bytes=256 * MIB, oom_kills=1, ram_bytes=24 << 30)


def test_a_host_ran_out_of_memory_when_the_oom_killer_killed_during_the_job():
    assert HostReport(START, OOM).ran_out_of_memory
    assert not HostReport(OOM, OOM).ran_out_of_memory  # a kill before the job is not the job's


def test_the_cause_names_host_victim_limit_and_peak():
    assert oom_cause("algo-2", "rank 1", HostReport(START, OOM)) == (
        "algo-2 ran out of memory: the kernel's OOM killer killed rank 1 (SIGKILL); container limit 256 MiB, peak "
        "usage 256 MiB of 256 MiB (page cache included). Use less memory per host (a smaller batch, fewer ranks per "
        "host or data-loader workers) or an instance type with more")
    no_limit = MemoryReading(peak_bytes=15 << 30, oom_kills=1, ram_bytes=16 << 30)
    assert oom_cause("algo-1", None, HostReport(START, no_limit)).startswith(
        "algo-1 ran out of memory: the kernel's OOM killer killed a process of the job; no container limit, 16 GiB of "
        "RAM, peak usage 15 GiB of 16 GiB")


def test_peaks_of_every_host_in_name_order():
    reports = {"algo-2": HostReport(START, OOM), "algo-1": HostReport(START, START)}
    assert peak_line(reports) == "peak memory: algo-1 30 MiB of 256 MiB, algo-2 256 MiB of 256 MiB"


def test_a_report_travels_as_a_message():
    report = HostReport(START, OOM, 64 * MIB)
    assert HostReport.from_message(report.to_message()) == report
    assert HostReport.from_message({"shm_bytes": "big"}) == HostReport(MemoryReading(), MemoryReading(), None)


def test_report_now_reads_this_machine():
    at_start = read_memory()
    report = report_now(at_start)
    assert report.at_start is at_start and not report.ran_out_of_memory  # nothing was killed in between
    # The size of the filesystem at /dev/shm, as the standard library measures it (None: this machine has none).
    assert report.shm_bytes == (shutil.disk_usage("/dev/shm").total if os.path.isdir("/dev/shm") else None)


def test_every_host_report_is_this_hosts_and_each_workers_answer():
    asked = []

    def ask_workers(message, reply_type, timeout_s):  # the master's: each worker's reply by host
        asked.append((message, reply_type, timeout_s))
        return {"algo-2": {"type": "host_report", "report": HostReport(START, OOM, 64 * MIB).to_message()}}

    reports = every_host_report("algo-1", read_memory(), ask_workers)
    assert asked == [({"type": "report_request"}, "host_report", REPORT_TIMEOUT_S)]
    assert sorted(reports) == ["algo-1", "algo-2"] and reports["algo-2"] == HostReport(START, OOM, 64 * MIB)
    assert list(every_host_report("algo-1", read_memory())) == ["algo-1"]  # one host: nobody to ask

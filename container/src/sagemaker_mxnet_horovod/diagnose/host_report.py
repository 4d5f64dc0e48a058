"""What each host tells the diagnosis about itself when the job ends: its container's memory at the job's start
and end (memory.py; with what /dev/shm had free) and the size of its /dev/shm. The master takes its own; each worker sends its own to the
master (act/cluster), whose diagnosis names the host that ran out of memory and whose end-of-job line gives
every host's peak."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sagemaker_mxnet_horovod.diagnose.memory import MemoryReading, oom_during, read_memory
from sagemaker_mxnet_horovod.parse.host_facts import shm_space


@dataclass(frozen=True)
class HostReport:
    at_start: MemoryReading
    at_end: MemoryReading
    shm_bytes: int | None = None

    @property
    def ran_out_of_memory(self) -> bool:
        """The OOM killer killed a process of this container during the job."""
        return oom_during(self.at_start, self.at_end)

    def to_message(self) -> dict:
        return {"at_start": self.at_start.to_message(), "at_end": self.at_end.to_message(),
                "shm_bytes": self.shm_bytes}

    @classmethod
    def from_message(cls, data: object) -> HostReport:
        values = data if isinstance(data, dict) else {}
        shm = values.get("shm_bytes")
        return cls(MemoryReading.from_message(values.get("at_start")), MemoryReading.from_message(values.get("at_end")),
                   shm if isinstance(shm, int) and not isinstance(shm, bool) else None)


def report_now(at_start: MemoryReading) -> HostReport:
    """This host's report at the job's end, from its reading at the start."""
    space = shm_space()
    return HostReport(at_start, read_memory(), space[0] if space else None)


# How long the workers' answers may take once the job has ended (they answer at once); their stacks too.
REPORT_TIMEOUT_S = 5.0


def every_host_report(host: str, at_start: MemoryReading, ask_workers=None) -> dict[str, HostReport]:
    """This host's report and each worker's, asked over the cluster (ask_workers: the master's; None on one host)."""
    reports = {host: report_now(at_start)}
    if ask_workers:
        replies = ask_workers({"type": "report_request"}, "host_report", REPORT_TIMEOUT_S)
        reports.update({worker: HostReport.from_message(reply.get("report")) for worker, reply in replies.items()})
    return reports


def peak_line(reports: Mapping[str, HostReport]) -> str:
    """'peak memory: algo-1 1.2 GiB of 3.7 GiB, algo-2 ...' for the end-of-job line (hosts in name order)."""
    return "peak memory: " + ", ".join(f"{host} {reports[host].at_end.describe_peak()}" for host in sorted(reports))


def oom_cause(host: str, victim: str | None, report: HostReport) -> str:
    """The failure file's first line for a host whose container ran out of memory. victim: 'rank 1', 'mnist', or
    None when the killed process is not known."""
    memory = report.at_end
    killed = f"killed {victim} (SIGKILL)" if victim else "killed a process of the job"
    peak = f"peak usage {memory.describe_peak()}" if memory.peak_bytes is not None else "peak usage not recorded"
    return (f"{host} ran out of memory: the kernel's OOM killer {killed}; {memory.describe_ceiling()}, {peak} "
            "(page cache included). Use less memory per host (a smaller batch, fewer ranks per host or data-loader "
            "workers) or an instance type with more")

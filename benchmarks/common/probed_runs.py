"""Jobs whose program is one of the first-epoch probes (probes/first_epoch_probe: the built-in program with a clock
on its start's phases and on every step), run while the machine's CPU is sampled (first_epoch,
rcnn_first_iteration): each rank's probe record, the phases of its start, and what other work took from the cores."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from scripts.local_job import run_job

PROBE_DIR = Path(__file__).resolve().parents[1] / "probes" / "first_epoch_probe"
# The probes import the built-in programs from where the image installs them; mpirun exports PYTHONPATH to every
# rank (backends/mpi/mpirun.py's EXPORTED_NAMES), so the job's environment reaches the worker hosts' ranks too.
PROBE_ENV = {"PYTHONPATH": "/opt/entrypoints"}


class CpuSampler:
    """The machine's busy CPU time and the job's containers' own (cgroup v1 cpuacct), sampled while the job runs:
    what other work took from the cores during each epoch (this machine is shared)."""

    def __init__(self):
        self.samples = []  # (epoch seconds, machine busy CPU-s, the job's containers' CPU-s)
        self.stop = threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")

    def machine_busy(self) -> float:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        return (sum(fields[:8]) - fields[3] - fields[4]) / self.tick  # all but idle and iowait

    def run(self, job) -> None:
        while not self.stop.is_set():
            used = 0.0
            for cid in list(job.containers.values()):
                try:
                    used += int(Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage").read_text()) / 1e9
                except (OSError, ValueError):
                    pass  # not started yet, or gone
            self.samples.append((time.time(), self.machine_busy(), used))
            self.stop.wait(0.25)

    def other_cpu_per_second(self, start: float, end: float) -> float | None:
        """CPU-s per wall second that processes outside the job's containers used between start and end."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return None
        (t0, busy0, job0), (t1, busy1, job1) = inside[0], inside[-1]
        return max(0.0, (busy1 - busy0) - (job1 - job0)) / (t1 - t0)


def run_probed(spec_for, workdir: Path, what: str):
    """Run the job spec_for(during) builds, sampling the machine's CPU meanwhile; its result, every rank's probe
    record (first-steps-rank<R>.json in output/data) by rank, and the sampler. A failed job ends the benchmark."""
    sampler = CpuSampler()
    try:
        result = run_job(spec_for(sampler.run), workdir)
    finally:
        sampler.stop.set()
    if any(code != 0 for code in result.exit_codes) or result.timed_out:
        sys.exit(f"benchmark: {what} failed:\n{result.describe()}")
    records = {}
    for host in result.hosts:
        for path in (host.root / "output" / "data").glob("first-steps-rank*.json"):
            record = json.loads(path.read_text())
            records[record["rank"]] = record
    return result, records, sampler


def phases(record: dict) -> dict:
    marks = record["marks"]
    return {name: at - marks[i - 1][1] for i, (name, at) in enumerate(marks) if i}

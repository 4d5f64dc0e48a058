"""Where a rank's CPU goes by thread, for the programs the link benchmark runs in the image (link_probe.py, and
script_probe.py, to which the benchmark copies this file): every thread's ticks from /proc, and CPU ms per step of
the main thread, the threads Horovod (or the kvstore) started and the rest (MXNet's engine, OpenMP, custom ops)."""

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def thread_ticks() -> dict:
    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks[int(tid)] = int(fields[11]) + int(fields[12])
    return ticks


def cpu_split(before: dict, after: dict, communication_tids: set, steps: int) -> dict:
    split = {"main": 0.0, "communication": 0.0, "engine+other": 0.0}
    for tid, ticks in after.items():
        kind = "main" if tid == os.getpid() else "communication" if tid in communication_tids else "engine+other"
        split[kind] += (ticks - before.get(tid, 0)) / CLK_TCK * 1000 / steps
    return split

"""Where the CPU of a job's processes goes, by role (MXNet's engine, the main thread, Horovod's background thread,
other threads, orted, mpirun, the launcher and sshd): every thread's ticks sampled from /proc while the job runs,
and CPU ms per rank-step of each role (horovod_tuning, parameter_server_scaling)."""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
SLEEP_SYSCALLS = {"35", "230"}  # nanosleep, clock_nanosleep (x86_64): Horovod's cycle sleep
class CpuSampler:
    """CPU ticks of every thread of the job's processes, sampled until stopped (a thread's last sample
    before it exits is what counts, so the last interval can be missed). With `start_when` (a condition
    checked at every sample), only the ticks after it first holds count: e.g. from the end of the first epoch,
    leaving out the processes' start and imports."""

    RANK_MARK = "/opt/entrypoints/"

    def __init__(self, interval: float = 0.25, start_when=None):
        self.interval, self._stop = interval, threading.Event()
        self.start_when, self.started = start_when, start_when is None
        self.threads: dict = {}  # (pid, tid) -> {"ticks", "kind", "sleeps", "samples", "before"}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _kind_of_process(self, pid: str) -> str | None:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        text = b" ".join(argv).decode(errors="replace")
        program = Path(argv[0].decode(errors="replace")).name if argv and argv[0] else ""
        if program == "mpirun":
            return "mpirun"
        if program == "orted":
            return "orted"
        if argv[1:3] == [b"-c", b"import mxnet"]:  # a parameter-server job's scheduler and servers
            return "servers+scheduler"
        if self.RANK_MARK in text:
            return "rank"
        if "sshd" in program or text.startswith(("/opt/venv/bin/python3 /opt/venv/bin/train", "sshd")):
            return "launcher+sshd"
        return None

    def _run(self) -> None:
        kinds: dict = {}
        while not self._stop.is_set():
            self.started = self.started or self.start_when()
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                if pid not in kinds:
                    kinds[pid] = self._kind_of_process(pid)
                kind = kinds[pid]
                if kind is None:
                    continue
                try:
                    tids = os.listdir(f"/proc/{pid}/task")
                except OSError:
                    continue
                for tid in tids:
                    base = f"/proc/{pid}/task/{tid}"
                    try:
                        stat = Path(f"{base}/stat").read_text()
                        syscall = Path(f"{base}/syscall").read_text().split()[0] if kind == "rank" else ""
                    except OSError:
                        continue
                    fields = stat[stat.rindex(")") + 2:].split()
                    entry = self.threads.setdefault((pid, tid), {"kind": kind, "sleeps": 0, "samples": 0,
                                                                 "before": 0})
                    entry["ticks"] = int(fields[11]) + int(fields[12])
                    if not self.started:
                        entry["before"] = entry["ticks"]
                        continue
                    entry["samples"] += 1
                    entry["sleeps"] += syscall in SLEEP_SYSCALLS
            self._stop.wait(self.interval)

    def seconds_by_role(self) -> dict:
        """CPU seconds summed over ranks per role: engine (the busiest thread of a rank other than its
        main thread and Horovod's), main, horovod, other rank threads, orted, mpirun, launcher+sshd."""

        def used(entry: dict) -> int:
            return entry["ticks"] - entry["before"]

        roles: dict = defaultdict(float)
        by_pid: dict = defaultdict(list)
        for (pid, tid), entry in self.threads.items():
            if entry["kind"] == "rank":
                by_pid[pid].append((tid, entry))
            else:
                roles[entry["kind"]] += used(entry) / CLK_TCK
        for pid, threads in by_pid.items():
            main = [e for t, e in threads if t == pid]
            rest = [(t, e) for t, e in threads if t != pid]
            sleepers = sorted(rest, key=lambda te: te[1]["sleeps"] / max(te[1]["samples"], 1), reverse=True)
            horovod = sleepers[0] if sleepers and sleepers[0][1]["sleeps"] else None
            others = sorted((te for te in rest if te is not horovod), key=lambda te: used(te[1]), reverse=True)
            engine = others[0] if others else None
            roles["main"] += sum(used(e) for e in main) / CLK_TCK
            roles["horovod"] += (used(horovod[1]) if horovod else 0) / CLK_TCK
            roles["engine"] += (used(engine[1]) if engine else 0) / CLK_TCK
            roles["other threads"] += sum(used(e) for _, e in others[1:]) / CLK_TCK
        return dict(roles)


ROLES = ("engine", "main", "horovod", "other threads", "orted", "mpirun", "launcher+sshd")


def per_rank_step(roles: dict, history: list, batch: int) -> dict:
    """CPU ms per rank-step (one rank's batch) of each role; rank-steps counted from the samples trained."""
    rank_steps = sum(epoch["train_samples"] for epoch in history) / batch
    return {role: seconds / rank_steps * 1000 for role, seconds in roles.items()}

"""Every rank's Python stack on demand, without stopping the job: into the log and output/data/stacks/.

In each Python rank (rank_program installs it), a thread waits for STACK_SIGNAL, which every other thread of the
rank blocks, and writes the stack of each of the rank's threads to RUN_DIR/stacks/<dump>/rank-<R>.txt. A thread
of its own answers where the main thread is blocked in native code (a read, a lock, a collective), which a Python
signal handler would wait for; a rank stuck while holding the GIL cannot answer. Each rank registers its pid,
rank and start time in RUN_DIR/stacks/ranks/ as it starts.

A launcher collects its host's ranks' stacks (collect_local): it names the dump in RUN_DIR/stacks/request,
signals every registered rank still alive and waits, within a deadline, for each one's file; then it writes
them (write_dump) to its log and to output/data/stacks/<dump>/<host>-rank-<R>.txt, with summary.txt last (it
marks the dump complete: `train stacks` waits for it).

What asks for a dump: SIGUSR1 to the launcher (its pid is in RUN_DIR/launcher.pid), sent by a user (`docker kill
--signal USR1`), by `train stacks` (docker exec) or by a rank's progress watch before it ends the job, which
leaves its reason in RUN_DIR/stacks/reasons/; and the launcher's own hang watches. Which ranks a dump covers is
the launcher's role's business (serve_requests' action): its own host's, and the master's asks every worker.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from sagemaker_mxnet_horovod.core.log import log

# A real-time signal nothing else in a rank uses (glibc keeps the first two for itself; Python's SIGRTMIN is
# past them). User programs keep SIGUSR1/SIGUSR2.
STACK_SIGNAL = signal.SIGRTMIN + 2
RANK_DEADLINE_S = 5.0  # how long a launcher waits for its ranks' stacks
JOB_DEADLINE_S = 20.0  # how long a progress watch, or `train stacks`, waits for a whole job's dump
LAUNCHER_PID_FILE = "launcher.pid"


def stacks_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "stacks"


def is_dump_name(name: str) -> bool:
    """A name dump_name could have made (a worker checks the master's before making it a directory)."""
    return bool(re.fullmatch(r"[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[a-z0-9-]*", name))


def dump_name(reason: str, now: float | None = None) -> str:
    """'20251125T210501.123Z-sigusr1': sorts by time, then the reason's head; the same name on every host of one
    dump."""
    milliseconds = round((time.time() if now is None else now) * 1000)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(milliseconds // 1000)) + f".{milliseconds % 1000:03d}Z"
    head = re.split(r"[,(:;]", reason)[0][:40]
    return f"{stamp}-{re.sub(r'[^a-z0-9]+', '-', head.lower()).strip('-')}"


def process_start(pid: int) -> str | None:
    """When the process started (clock ticks since boot, /proc/PID/stat field 22): with the pid, who it is."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


# -------------------------------------------------------------------------------------------------------------
# In the rank


def format_stacks(header: str, skip_ident: int | None = None) -> str:
    """Every thread's stack in this process, the main thread first, most recent call last."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    main = threading.main_thread().ident
    parts = [header]
    for ident, frame in sorted(sys._current_frames().items(), key=lambda item: item[0] != main):
        if ident != skip_ident:
            parts.append(f"\nThread {names.get(ident, '?')} ({ident:#x}):\n" + "".join(traceback.format_stack(frame)))
    return "\n".join(parts).rstrip("\n") + "\n"


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text)
    os.replace(partial, path)


class RankDumper:
    """The rank's side: register, then answer each STACK_SIGNAL with the rank's stacks."""

    def __init__(self, run_dir: str | Path, rank: int, host: str):
        self.directory, self.rank, self.host = stacks_dir(run_dir), rank, host
        self.dumped = threading.Event()  # set after each dump (the progress watch waits for its own)

    def install(self) -> RankDumper:
        # Blocked here, before the program starts, so every thread it (or a native library) starts blocks it too.
        signal.pthread_sigmask(signal.SIG_BLOCK, {STACK_SIGNAL})
        write_atomically(self.directory / "ranks" / str(os.getpid()),
                         f"{self.rank} {self.host} {process_start(os.getpid())}\n")
        threading.Thread(target=self.serve, name="stack-dump", daemon=True).start()
        return self

    def serve(self) -> None:
        while True:
            signal.sigwait({STACK_SIGNAL})
            try:
                dump = (self.directory / "request").read_text().strip()
                header = f"rank {self.rank} on {self.host} (pid {os.getpid()}), {time.strftime('%H:%M:%S')}"
                write_atomically(self.directory / dump / f"rank-{self.rank}.txt",
                                 format_stacks(header, threading.get_ident()))
            except OSError:
                continue  # the launcher says which rank did not answer
            self.dumped.set()


def install(run_dir: str, rank: int, host: str) -> RankDumper | None:
    """The rank's dumper, when the launcher's run directory is there (plain mpirun has none)."""
    try:
        return RankDumper(run_dir, rank, host).install()
    except OSError:
        return None


# -------------------------------------------------------------------------------------------------------------
# In the launcher


def registered_ranks(run_dir: str | Path) -> dict[int, tuple[int, str]]:
    """pid -> (rank, host) of every registered rank still running. A pid a rank left behind and another process
    took since is not one: the real-time signal would end it."""
    found = {}
    for entry in (stacks_dir(run_dir) / "ranks").glob("[0-9]*"):
        try:
            rank, host, started = entry.read_text().split()
        except (OSError, ValueError):
            continue
        if process_start(int(entry.name)) == started:
            found[int(entry.name)] = (int(rank), host)
    return found


_collect_lock = threading.Lock()


def collect_local(run_dir: str | Path, dump: str, deadline_s: float = RANK_DEADLINE_S) -> dict[int, str]:
    """rank -> its stacks, for every Python rank running on this host; a rank that did not answer in time gets a
    line that says so. One dump at a time."""
    directory = stacks_dir(run_dir)
    with _collect_lock:
        ranks = registered_ranks(run_dir)
        if not ranks:
            return {}
        write_atomically(directory / "request", dump + "\n")
        for pid in ranks:
            try:
                os.kill(pid, STACK_SIGNAL)
            except ProcessLookupError:
                pass
        files = {rank: directory / dump / f"rank-{rank}.txt" for rank, _ in ranks.values()}
        deadline = time.monotonic() + deadline_s
        while not all(path.exists() for path in files.values()) and time.monotonic() < deadline:
            time.sleep(0.01)  # the ranks' files appear within milliseconds; nothing to block on without inotify
        return {rank: path.read_text() if path.exists() else
                f"rank {rank} on {ranks_host(ranks, rank)}: no stacks within {deadline_s:g} s (stuck while holding "
                "Python's GIL, or exiting)\n" for rank, path in sorted(files.items())}


def ranks_host(ranks: Mapping[int, tuple[int, str]], rank: int) -> str:
    return next((host for r, host in ranks.values() if r == rank), "?")


def write_dump(output_dir: Path, dump: str, host_stacks: Mapping[str, Mapping[int, str]], reason: str,
               log, silent_hosts: Sequence[str] = ()) -> Path:
    """Each rank's stacks into output_dir/<dump>/<host>-rank-<R>.txt and the log; summary.txt last, naming the
    hosts that did not answer."""
    directory = output_dir / dump
    shown = []
    for host in sorted(host_stacks):
        for rank, text in sorted(host_stacks[host].items()):
            try:
                write_atomically(directory / f"{host}-rank-{rank}.txt", text)
            except OSError as error:
                log(f"could not write the stacks of rank {rank} on {host}: {error}")
            log(f"stacks of rank {rank} on {host} ({reason}):\n{text.rstrip()}")
            shown.append(f"rank {rank} on {host}")
    listing = ", ".join(shown) or "no Python rank was running"
    if silent_hosts:
        listing += f"; no answer from {', '.join(sorted(silent_hosts))}"
    try:
        write_atomically(directory / "summary.txt", f"{dump}: {reason}: {listing}\n")
    except OSError as error:
        log(f"could not write {directory / 'summary.txt'}: {error}")
    log(f"stacks written to {directory}: {listing}")
    return directory


def dump_job(run_dir: str | Path, output_dir: Path, host: str, workers: Sequence[str], ask_workers, reason: str,
             log, reply_s: float) -> None:
    """From the master: every rank's stacks on every host, into the log and output_dir/<dump>/ (each worker writes
    its own there too). This host's ranks while the workers take theirs: one moment on every host. ask_workers:
    the cluster's (Master.ask_workers; None without workers); reply_s: how long a worker's answer may take on top
    of its ranks' deadline."""
    dump, own = dump_name(reason), {}
    collecting = threading.Thread(target=lambda: own.update(collect_local(run_dir, dump)))
    collecting.start()
    replies = ask_workers({"type": "dump_stacks", "dump": dump, "reason": reason}, "stacks",
                          RANK_DEADLINE_S + reply_s) if ask_workers else {}
    collecting.join()
    host_stacks = {worker: {int(rank): str(text) for rank, text in dict(reply.get("ranks") or {}).items()}
                   for worker, reply in replies.items()}
    host_stacks[host] = own
    write_dump(output_dir, dump, host_stacks, reason, log, sorted(set(workers) - set(replies)))


def dump_host(run_dir: str | Path, output_data_dir: str, host: str, reason: str, dump: str | None = None) -> dict[int, str]:
    """This host's ranks' stacks, into the log and output/data/stacks/<dump>/ (none without output/data); returned
    for the master. dump: the master's name for it, which every host's files of one dump share."""
    dump = dump if dump and is_dump_name(dump) else dump_name(reason)
    found = collect_local(run_dir, dump)
    if output_data_dir:
        write_dump(Path(output_data_dir) / "stacks", dump, {host: found}, reason, log)
    return found


class JobDumps:
    """Every rank's stacks on every host, one dump at a time: what the host that leads the job (the master, or a host
    alone) writes when asked (SIGUSR1, a host's request, a hang watch). ask_workers: the cluster's way to ask the
    other hosts (Master.ask_workers), once there is one; reply_s: how long a host's answer may take beyond its ranks'
    deadline."""

    def __init__(self, run_dir: str, output_data_dir: str, host: str, workers: Sequence[str],
                 ask_workers: Callable[[], object], reply_s: float):
        self.run_dir, self.output_data_dir, self.host, self.workers = run_dir, output_data_dir, host, tuple(workers)
        self.ask_workers, self.reply_s = ask_workers, reply_s
        self.lock = threading.Lock()

    def dump(self, reason: str) -> None:
        """Into the log and output/data/stacks/<dump>/ (each other host writes its own there too)."""
        if not self.output_data_dir:
            return
        with self.lock:
            dump_job(self.run_dir, Path(self.output_data_dir) / "stacks", self.host, self.workers, self.ask_workers(),
                     reason, log, self.reply_s)

    def dump_later(self, reason: str) -> None:
        """From a thread that must not wait for it (a stderr observer, the cluster's reader)."""
        threading.Thread(target=self.dump, args=(reason,), name="stacks", daemon=True).start()


# -------------------------------------------------------------------------------------------------------------
# Asking for a dump


def pending_reasons(run_dir: str | Path) -> list[str]:
    """The reasons ranks left for the launcher (taken: each is read once)."""
    reasons = []
    for entry in sorted((stacks_dir(run_dir) / "reasons").glob("*")):
        try:
            reasons.append(entry.read_text().strip())
            entry.unlink()
        except OSError:
            continue
    return [reason for reason in reasons if reason]


def serve_requests(run_dir: str | Path, action, log) -> None:
    """SIGUSR1 to this launcher runs action(reason) in a thread (None: no job runs yet, which is said); the
    reason is what ranks left in RUN_DIR/stacks/reasons/, else the signal's. The pid file says where to send it."""
    def handler(signum, _frame) -> None:
        reason = "; ".join(pending_reasons(run_dir)) or "SIGUSR1"
        if action is None:
            log(f"stacks asked for ({reason}) before the job started: none to write")
            return
        threading.Thread(target=action, args=(reason,), name="stacks", daemon=True).start()

    signal.signal(signal.SIGUSR1, handler)
    try:
        write_atomically(Path(run_dir) / LAUNCHER_PID_FILE, f"{os.getpid()} {process_start(os.getpid())}\n")
    except OSError:
        pass  # no run directory (yet): nobody can ask


def launcher_pid(run_dir: str | Path) -> int | None:
    """The pid of this container's running launcher, if there is one (the same process: its start time too)."""
    try:
        pid, started = (Path(run_dir) / LAUNCHER_PID_FILE).read_text().split()
    except (OSError, ValueError):
        return None
    return int(pid) if process_start(int(pid)) == started else None


def ask_launcher(run_dir: str | Path, reason: str, dumper: RankDumper, deadline_s: float = JOB_DEADLINE_S) -> bool:
    """From a rank: ask this host's launcher for the whole job's stacks, and wait until this rank's are taken."""
    pid = launcher_pid(run_dir)
    if pid is None:
        return False
    dumper.dumped.clear()
    try:
        write_atomically(stacks_dir(run_dir) / "reasons" / str(os.getpid()), reason + "\n")
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return False
    return dumper.dumped.wait(deadline_s)


def complete_dumps(output_dir: Path) -> set[str]:
    return {path.parent.name for path in output_dir.glob("*/summary.txt")}


def request_and_show(run_dir: str | Path, output_dir: Path, deadline_s: float = JOB_DEADLINE_S) -> int:
    """`train stacks`: signal this container's launcher, wait for the dump it writes, print it. Exit status 1 when
    no launcher runs here or no dump arrived in time."""
    pid = launcher_pid(run_dir)
    if pid is None:
        print(f"train stacks: no train launcher is running in this container (no live pid in "
              f"{Path(run_dir) / LAUNCHER_PID_FILE})", file=sys.stderr)
        return 1
    before = complete_dumps(output_dir)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + deadline_s
    while not (new := complete_dumps(output_dir) - before) and time.monotonic() < deadline:
        time.sleep(0.05)  # the launcher writes summary.txt last; polled, as files give no notice
    if not new:
        print(f"train stacks: the launcher (pid {pid}) wrote no stacks to {output_dir} within {deadline_s:g} s",
              file=sys.stderr)
        return 1
    directory = output_dir / max(new)
    for path in sorted(directory.glob("*-rank-*.txt")):
        print(f"===== {path.name}\n{path.read_text().rstrip()}")
    print(f"===== {directory / 'summary.txt'}\n{(directory / 'summary.txt').read_text().rstrip()}")
    return 0

"""A host of a parameter-server job, in named steps: check in (the master, the job's first host, gathers the
others), start this host's own processes (the plan's scheduler, servers and workers), watch them until the job's
verdict, end what still runs, and end as the job ended. No mpirun and no ssh: every host starts its own.

ps-lite has no failure detection (a process that ends leaves the others waiting for it forever), so the
launcher is the job's: every host watches its processes (diagnose/roles.HostWatch) and reports to the master,
which decides (diagnose/roles.JobWatch) and tells every host. Every event (a process's exit, a signal, a host's
report, the master's verdict) reaches one loop through one queue, so each decision is taken in one place, and
every wait in it has a deadline.

As on the MPI path: each process's output goes to its own log in output/data/logs/ (a worker's console lines only
for mpi_console_ranks); a process SIGKILLed while this host's OOM killer counted a kill is named as out of memory,
one that dies of SIGBUS (or another symptom of shm.py) where /dev/shm is small as a victim of /dev/shm's size; the
job's end logs every host's peak memory; SIGUSR1 to any host's launcher (or `train stacks`, or a worker's progress
watch) writes every worker's Python stacks on every host (stacks.py), through the master.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from pathlib import Path

from sagemaker_mxnet_horovod.act import stacks
from sagemaker_mxnet_horovod.act.cluster.master import Master
from sagemaker_mxnet_horovod.act.cluster.worker import (
    HostDiagnostics,
    WorkerOutcome,
    WorkerSession,
    check_in_without_ssh,
)
from sagemaker_mxnet_horovod.act.outcome_files import read_user_failure
from sagemaker_mxnet_horovod.act.process_group import OUTPUT_DRAIN_S, ProcessExit, ProcessGroup, ProcessLogs
from sagemaker_mxnet_horovod.act.rank_env import SCRIPT_RETURNED
from sagemaker_mxnet_horovod.core.exits import EXIT_FAILED, EXIT_STOPPED, STOP_GRACE_S, ClusterError, StopRequested
from sagemaker_mxnet_horovod.core.failure import Failure, describe_exit
from sagemaker_mxnet_horovod.core.log import log
from sagemaker_mxnet_horovod.core.outcome import Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.diagnose import shm
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.host_report import (
    REPORT_TIMEOUT_S,
    every_host_report,
    oom_cause,
    peak_line,
    report_now,
)
from sagemaker_mxnet_horovod.diagnose.memory import oom_during, read_memory
from sagemaker_mxnet_horovod.diagnose.roles import HostWatch, JobWatch, Verdict

END_GRACE_S = 10.0  # once the verdict is known, how long the processes still running get after SIGTERM
TICK_S = 1.0  # the loop's longest wait without an event


class ParameterServerRun:
    def __init__(self, plan: Plan, env: dict, bind_address: str, failure_file: Path):
        self.plan, self.bind_address, self.failure_file = plan, bind_address, failure_file
        self.host, self.is_master = plan.current_host, plan.role == "master"
        self.events: queue.SimpleQueue = queue.SimpleQueue()  # put() is safe in a signal handler
        self.crash_log = CrashLog()
        self.memory_at_start = read_memory()  # the OOM killer's count before the job: its kills are the job's
        self.output = Path(plan.output_data_dir) if plan.output_data_dir else None
        self.group = ProcessGroup(plan.processes, env, cwd=plan.processes[0].cwd if plan.processes else None,
                                  stderr_observers=(self.crash_log.observe, self.watch_returned),
                                  on_exit=lambda ended: self.events.put(("exit", ended)),
                                  logs=ProcessLogs(self.output / "logs", self.host, plan.processes) if self.output
                                  else None, console_ranks=plan.console_ranks)
        self.stacks_lock = threading.Lock()  # one dump at a time
        self.watch = HostWatch(self.host, [p.name for p in plan.processes if p.role == "worker"])
        self.job = JobWatch(plan.hosts, STOP_GRACE_S + END_GRACE_S) if self.is_master else None
        self.master: Master | None = None
        self.session: WorkerSession | None = None
        self.stop_requested = threading.Event()
        self.stopped_at: float | None = None
        self.reported: set[str] = set()
        self.verdict: Verdict | None = None
        self.master_user_failure: str | None = None

    def run(self) -> Outcome:
        failure = self.gather()
        if failure is not None:
            return Outcome(failure)
        self.start()
        verdict = self.supervise()
        return self.release(verdict)

    # -----------------------------------------------------------------------------------------------------
    # Steps

    def gather(self) -> Failure | None:
        """The master waits for every other host's check-in; another host checks in (nothing to do alone)."""
        plan, deadline = self.plan, time.monotonic() + self.plan.peer_timeout_s
        started = time.monotonic()
        try:
            if self.is_master and plan.workers:
                self.master = Master(plan.workers, plan.handshake_port, self.bind_address, Path(plan.run_dir),
                                     deadline)
                self.master.on_report = lambda host, message: self.events.put(("report", host, message))
                self.master.on_worker_lost = lambda host, how: self.events.put(("lost", host, how))
                self.master.on_stacks_wanted = self.dump_stacks_later
                self.master.gather(None)
            elif not self.is_master:
                connection = check_in_without_ssh(plan.master_host, plan.handshake_port, self.host, deadline,
                                                  self.bind_address or None)
                diagnostics = HostDiagnostics(local_stacks=self.local_stacks, memory_at_start=self.memory_at_start)
                self.session = WorkerSession(connection, plan.master_host, self.stop_requested, self.failure_file,
                                             diagnostics, on_stop=lambda signum: self.events.put(("stop", signum)),
                                             reports_daemon=False, bye_on_done=False)
        except (ClusterError, OSError) as error:  # OSError: the master's end reset during the check-in
            return self.setup_failed(str(error))
        except StopRequested as stop:
            if self.master:
                self.master.finish(EXIT_STOPPED, f"stopped by {stop} during cluster setup")
            return Failure(f"stopped by {stop} before the job started", EXIT_STOPPED, host=self.host)
        if plan.workers and self.is_master:
            log(f"{len(plan.workers)} host(s) checked in in {time.monotonic() - started:.2f} s")
        return None

    def setup_failed(self, error: str) -> Failure:
        if self.is_master:
            message = f"cluster setup failed on master {self.host}: {error}"
            self.master.finish(EXIT_FAILED, message)
            return Failure(message, host=self.host)
        return Failure(f"host {self.host}: {error}", host=self.host)

    def start(self) -> None:
        """This host's processes, with SIGTERM and SIGINT turned into events of the loop; on other hosts the
        session with the master runs beside them."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda number, _frame: self.events.put(("signal", number)))
        # Asked for stacks on another host: the master asks every host, this one included.
        stacks.serve_requests(self.plan.run_dir, self.session.diagnostics.stacks_wanted.put if self.session
                              else self.dump_stacks, log)
        if self.session:
            threading.Thread(target=self.follow_master, daemon=True).start()
        self.started = time.monotonic()
        self.group.start()
        log(f"started {', '.join(p.name for p in self.plan.processes)}")

    def watch_returned(self, index: int, line: str) -> None:
        if line == SCRIPT_RETURNED:  # a worker's own line, through rank_env
            self.events.put(("returned", index))

    def follow_master(self) -> None:
        try:
            outcome = self.session.run()  # until the master's verdict, or until it is lost
        except (ClusterError, OSError) as error:
            outcome = WorkerOutcome(EXIT_FAILED, str(error))
        self.events.put(("verdict", outcome))

    def supervise(self) -> Verdict:
        """Until the job's verdict: every event, then this host's watch, then (on the master) the job's."""
        while True:
            now = time.monotonic()
            self.report(now)
            if self.verdict is None and self.job:
                self.verdict = self.job.verdict(now)
            if self.verdict is not None:
                return self.verdict
            try:
                self.handle(self.events.get(timeout=self.wait_s(now)))
            except queue.Empty:
                pass

    def release(self, verdict: Verdict) -> Outcome:
        """End what still runs on this host; the master tells every host first, then waits for their byes."""
        failure = verdict.failure
        code = failure.exit_code if failure else 0
        self.log_peak_memory()
        if self.master:  # the hosts' ends from here on are the job's end, not losses
            self.master.broadcast_done(code, failure.render() if failure else None,
                                       read_user_failure(self.failure_file) if code else None)
        self.end_processes(failure)
        log(f"job {'succeeded' if failure is None else describe_exit(code)} after "
            f"{time.monotonic() - self.started:.1f} s")
        if self.master:  # each host says bye once its own processes have ended too
            self.master.await_byes(END_GRACE_S + OUTPUT_DRAIN_S + 5)
            return Outcome(failure, tuple(sorted(self.master.user_failures.items())))
        if self.session:
            self.session.bye(code)
            self.session.connection.close()
        if failure is not None and not self.is_master:
            return Outcome(failure, ((self.plan.master_host, self.master_user_failure),))
        return Outcome(failure)

    def end_processes(self, failure: Failure | None) -> None:
        """Success: the servers and the scheduler are done (they exit on their own at the workers' end); a failure
        or a stop: everything still running is. SIGTERM, then SIGKILL to whatever outlives the grace, and to
        whatever the ended processes left behind."""
        still = self.group.running()
        if still:
            log(f"ending {', '.join(self.plan.processes[index].name for index in still)}")
        self.group.stop(None, END_GRACE_S)
        self.group.kill(None, sessions_of_ended=True)
        ended = [self.group.ended[index] for index in still if index in self.group.ended]
        if ended:
            log("; ".join(f"{end.name} {describe_exit(end.returncode)}" for end in ended))
        if self.group.logs:
            self.group.logs.close()

    def log_peak_memory(self) -> None:
        """The master's end-of-job line: every host's peak memory (their sessions answer while they wait)."""
        if not self.is_master:
            return
        ask_workers = self.master.ask_workers if self.master else None
        log(peak_line(every_host_report(self.host, self.memory_at_start, ask_workers)))

    # -----------------------------------------------------------------------------------------------------
    # Events

    def handle(self, event: tuple) -> None:
        kind, *args = event
        now = time.monotonic()
        if kind == "exit":
            self.process_ended(args[0], now)
        elif kind == "returned":
            self.watch.worker_returned(self.plan.processes[args[0]].name, now)
        elif kind == "signal":
            self.stop(args[0], now, by_this_host=True)
        elif kind == "stop":
            self.stop(args[0], now, by_this_host=False)
        elif kind == "report":
            self.host_reported(args[0], args[1], now)
        elif kind == "lost":
            self.job.host_failed(Failure(f"host {args[0]} {args[1]}", host=args[0]))
        elif kind == "verdict":
            self.master_decided(args[0])

    def process_ended(self, ended: ProcessExit, now: float) -> None:
        """Named by how it ended and its error; by what it died of when this host knows better: the OOM killer's kill,
        else a full /dev/shm (shm.py)."""
        log(f"{ended.name} {describe_exit(ended.returncode)}")
        cause = None
        if ended.returncode == -signal.SIGKILL:
            report = report_now(self.memory_at_start)
            if oom_during(report.at_start, report.at_end):
                cause = oom_cause(self.host, ended.name, report)
        if cause is None:
            cause = shm.process_cause(f"{ended.name} on {self.host}", ended.tail, ended.returncode, self.plan.shm)
        self.watch.process_ended(ended.name, ended.role, ended.returncode, ended.tail, now,
                                 self.crash_log.crash(ended.index), cause)

    def stop(self, signum: int, now: float, by_this_host: bool) -> None:
        """A stop (SageMaker's, or a spot interruption): the workers get the signal to checkpoint while the
        servers still serve them; the master stops every host; the verdict follows once the workers have ended."""
        if self.stopped_at is not None:
            return  # SageMaker and compose may both send SIGTERM: one stop is enough
        self.stopped_at, self.watch.stopping = now, True
        self.stop_requested.set()
        log(f"received {signal.Signals(signum).name}; stopping the workers (killing them if still running after "
            f"{STOP_GRACE_S:g} s)")
        self.group.send_signal({"worker"}, signum)
        if self.job:
            self.job.stop_requested(signum, now)
            if self.master:
                self.master.broadcast_stop(signum)
        elif by_this_host:
            self.session.connection.send_quietly({"type": "stopped", "signal": int(signum)})

    def host_reported(self, host: str, message: dict, now: float) -> None:
        kind = message.get("type")
        if kind == "failed":
            self.job.host_failed(Failure(str(message.get("failure") or f"a process on {host} failed"),
                                         int(message.get("exit_code") or EXIT_FAILED), host=host))
        elif kind == "workers_finished":
            self.job.workers_finished(host, now)
        elif kind == "workers_ended":
            self.job.workers_ended(host, bool(message.get("succeeded")), now)
        elif kind == "stopped":
            self.stop(int(message.get("signal") or signal.SIGTERM), now, by_this_host=False)

    def master_decided(self, outcome) -> None:
        """The master's verdict, or the session's end without one (the master lost, or silent too long)."""
        self.master_user_failure = outcome.master_user_failure
        if outcome.exit_code == 0:
            self.verdict = Verdict(None)
        else:
            self.verdict = Verdict(Failure(f"host {self.host}: {outcome.failure}", outcome.exit_code, host=self.host))

    # -----------------------------------------------------------------------------------------------------
    # This host's watch, reported to the master (or, on the master, to the job's watch)

    def report(self, now: float) -> None:
        failure = self.watch.check(now)
        if failure is not None and "failed" not in self.reported:
            self.reported.add("failed")
            self.send({"type": "failed", "failure": failure.render(), "exit_code": failure.exit_code}, failure=failure)
        if self.watch.workers_finished and "workers_finished" not in self.reported:
            self.reported.add("workers_finished")
            self.send({"type": "workers_finished"})
        if self.watch.workers_ended and "workers_ended" not in self.reported:
            self.reported.add("workers_ended")
            self.send({"type": "workers_ended", "succeeded": self.watch.workers_succeeded})
        if self.stopped_at is not None and now > self.stopped_at + STOP_GRACE_S and self.group.running({"worker"}):
            log(f"workers still running {STOP_GRACE_S:g} s after the stop: killing them")
            self.group.kill({"worker"})

    def send(self, message: dict, failure: Failure | None = None) -> None:
        if self.job:
            now = time.monotonic()
            if failure is not None:
                self.job.host_failed(failure)
            elif message["type"] == "workers_finished":
                self.job.workers_finished(self.host, now)
            elif message["type"] == "workers_ended":
                self.job.workers_ended(self.host, message["succeeded"], now)
        else:
            self.session.connection.send_quietly(message)

    def wait_s(self, now: float) -> float:
        deadlines = [d for d in (self.watch.next_deadline(), self.job.next_deadline() if self.job else None) if d]
        if self.stopped_at is not None:
            deadlines.append(self.stopped_at + STOP_GRACE_S)
        return max(0.01, min([TICK_S, *(d - now for d in deadlines)]))

    # -----------------------------------------------------------------------------------------------------
    # Every worker's stacks (stacks.py)

    def dump_stacks(self, reason: str) -> None:
        """On the master: every host's, into the log and output/data/stacks/<dump>/."""
        if self.output is None:
            return
        with self.stacks_lock:
            stacks.dump_job(self.plan.run_dir, self.output / "stacks", self.host, self.plan.workers,
                            self.master.ask_workers if self.master else None, reason, log, REPORT_TIMEOUT_S)

    def dump_stacks_later(self, reason: str) -> None:
        """From the cluster's thread, which must go on reading the hosts' messages."""
        threading.Thread(target=self.dump_stacks, args=(reason,), name="stacks", daemon=True).start()

    def local_stacks(self, dump: str, reason: str) -> dict[int, str]:
        """On another host, when the master asks: this host's workers', into its log and output/data/stacks/."""
        dump = dump if stacks.is_dump_name(dump) else stacks.dump_name(reason)
        found = stacks.collect_local(self.plan.run_dir, dump)
        if self.output is not None:
            stacks.write_dump(self.output / "stacks", dump, {self.host: found}, reason, log)
        return found

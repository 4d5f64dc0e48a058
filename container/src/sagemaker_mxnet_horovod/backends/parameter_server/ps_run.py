"""A host of a parameter-server job, in named steps: check in (the master, the job's first host, gathers the
others), start this host's own processes (the plan's scheduler, servers and workers), watch them until the job's
verdict, end what still runs, and end as the job ended. No mpirun and no ssh: every host starts its own.

ps-lite has no failure detection (a process that ends leaves the others waiting for it forever), so the
launcher is the job's: every host watches its processes (roles.HostWatch) and reports to the master, which decides
(roles.JobWatch) and tells every host. Every event (a process's exit, a stop, a host's report, the master's
verdict) reaches one loop through one queue, each kind to its own handler, so each decision is taken in one place,
and every wait in it has a deadline. The master's own reports take the path the other hosts' take.

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
from collections.abc import Mapping
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
from sagemaker_mxnet_horovod.act.rank_program import SCRIPT_RETURNED
from sagemaker_mxnet_horovod.backends.parameter_server.process_group import (
    OUTPUT_DRAIN_S,
    ProcessExit,
    ProcessGroup,
    ProcessLogs,
)
from sagemaker_mxnet_horovod.backends.parameter_server.roles import HostWatch, JobWatch, Verdict
from sagemaker_mxnet_horovod.core import stop
from sagemaker_mxnet_horovod.core.exits import EXIT_FAILED, STOP_GRACE_S, ClusterError, StopRequested
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

END_GRACE_S = 10.0  # once the verdict is known, how long the processes still running get after SIGTERM
TICK_S = 1.0  # the loop's longest wait without an event


class ParameterServerRun:
    def __init__(self, plan: Plan, env: Mapping[str, str], bind_address: str, failure_file: Path):
        self.plan, self.bind_address, self.failure_file = plan, bind_address, failure_file
        self.host, self.is_master = plan.current_host, plan.role == "master"
        self.events: queue.SimpleQueue = queue.SimpleQueue()  # put() is safe in a signal handler
        self.crash_log = CrashLog()
        self.memory_at_start = read_memory()  # the OOM killer's count before the job: its kills are the job's
        output = Path(plan.output_data_dir) if plan.output_data_dir else None
        self.group = ProcessGroup(plan.processes, env, cwd=plan.processes[0].cwd if plan.processes else None,
                                  stderr_observers=(self.crash_log.observe, self.watch_returned),
                                  on_exit=lambda ended: self.events.put(("exit", ended)),
                                  logs=ProcessLogs(output / "logs", self.host, plan.processes) if output else None,
                                  console_ranks=plan.console_ranks)
        self.stacks = stacks.JobDumps(plan.run_dir, plan.output_data_dir, self.host, plan.workers,
                                      lambda: self.master.ask_workers if self.master else None, REPORT_TIMEOUT_S)
        self.watch = HostWatch(self.host, [p.name for p in plan.processes if p.role == "worker"])
        self.job = JobWatch(plan.hosts, STOP_GRACE_S + END_GRACE_S) if self.is_master else None
        self.master: Master | None = None
        self.session: WorkerSession | None = None
        self.stop_requested = threading.Event()
        self.stopped_at: float | None = None
        self.reported: set[str] = set()
        self.verdict: Verdict | None = None
        self.master_user_failure: str | None = None
        # Each event of the loop, and each report of a host's (on the master), to its handler.
        self.handlers = {"exit": self.process_ended, "returned": self.worker_returned, "signal": self.stop_here,
                         "stop": self.stop_from_master, "report": self.host_reported, "lost": self.host_lost,
                         "verdict": self.master_decided}
        self.reports = {"failed": self.host_failed, "workers_finished": self.host_workers_finished,
                        "workers_ended": self.host_workers_ended, "stopped": self.host_stopped}

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
                self.master.on_stacks_wanted = self.stacks.dump_later
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
        except StopRequested as stopped:
            failure = stop.stopped(stopped.signum, "the job had not started", host=self.host)
            if self.master:
                self.master.finish(failure.exit_code, failure.render())
            return failure
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
        """This host's processes, a stop turned into an event of the loop; on other hosts the session with the
        master runs beside them."""
        stop.listen(lambda signum: self.events.put(("signal", signum)))
        # Asked for stacks on another host: the master asks every host, this one included.
        stacks.serve_requests(self.plan.run_dir, self.session.diagnostics.stacks_wanted.put if self.session
                              else self.stacks.dump, log)
        if self.session:
            threading.Thread(target=self.follow_master, daemon=True).start()
        self.started = time.monotonic()
        self.group.start()
        log(f"started {', '.join(p.name for p in self.plan.processes)}")

    def watch_returned(self, index: int, line: str) -> None:
        if line == SCRIPT_RETURNED:  # a worker's own line, through rank_program
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
                kind, *args = self.events.get(timeout=self.wait_s(now))
            except queue.Empty:
                continue
            self.handlers[kind](*args, now=time.monotonic())

    def release(self, verdict: Verdict) -> Outcome:
        """End what still runs on this host; the master tells every host first, then waits for their byes."""
        failure = verdict.failure
        code = failure.exit_code if failure else 0
        if verdict.note:
            log(verdict.note)
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

    def worker_returned(self, index: int, now: float) -> None:
        self.watch.worker_returned(self.plan.processes[index].name, now)

    def stop_here(self, signum: int, now: float) -> None:
        """This host was stopped (core/stop.py hands each signal once)."""
        self.stop(signum, now, by_this_host=True)

    def stop_from_master(self, signum: int, now: float) -> None:
        self.stop(signum, now, by_this_host=False)

    def stop(self, signum: int, now: float, by_this_host: bool) -> None:
        """A stop (SageMaker's, or a spot interruption): the workers get the signal to checkpoint while the
        servers still serve them; the master stops every host; the verdict follows once the workers have ended."""
        if self.stopped_at is not None:
            return  # every host is stopped at once: the first stop, of this host's or another's, is the one
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
        """A host's report on its processes (the master's own too, with the Failure itself as its record)."""
        handler = self.reports.get(message.get("type"))
        if handler:
            handler(host, message, now)

    def host_failed(self, host: str, message: dict, now: float) -> None:
        self.job.host_failed(message.get("record") or Failure(
            str(message.get("failure") or f"a process on {host} failed"), int(message.get("exit_code") or EXIT_FAILED),
            host=host))

    def host_workers_finished(self, host: str, message: dict, now: float) -> None:
        self.job.workers_finished(host, now)

    def host_workers_ended(self, host: str, message: dict, now: float) -> None:
        self.job.workers_ended(host, bool(message.get("succeeded")), now)

    def host_stopped(self, host: str, message: dict, now: float) -> None:
        self.stop(int(message.get("signal") or signal.SIGTERM), now, by_this_host=False)

    def host_lost(self, host: str, how: str, now: float) -> None:
        self.job.host_failed(Failure(f"host {host} {how}", host=host))

    def master_decided(self, outcome: WorkerOutcome, now: float) -> None:
        """The master's verdict, or the session's end without one (the master lost, or silent too long)."""
        self.master_user_failure = outcome.master_user_failure
        if outcome.exit_code == 0:
            self.verdict = Verdict(None)
        else:
            self.verdict = Verdict(Failure(f"host {self.host}: {outcome.failure}", outcome.exit_code, host=self.host))

    # -----------------------------------------------------------------------------------------------------
    # This host's watch, reported to the master (the master's own, to itself)

    def report(self, now: float) -> None:
        failure = self.watch.check(now)
        if failure is not None and "failed" not in self.reported:
            self.reported.add("failed")
            self.send({"type": "failed", "failure": failure.render(), "exit_code": failure.exit_code}, failure)
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
            self.host_reported(self.host, {**message, "record": failure}, time.monotonic())
        else:
            self.session.connection.send_quietly(message)

    def wait_s(self, now: float) -> float:
        deadlines = [d for d in (self.watch.next_deadline(), self.job.next_deadline() if self.job else None) if d]
        if self.stopped_at is not None:
            deadlines.append(self.stopped_at + STOP_GRACE_S)
        return max(0.01, min([TICK_S, *(d - now for d in deadlines)]))

    def local_stacks(self, dump: str, reason: str) -> dict[int, str]:
        """On another host, when the master asks: this host's workers' stacks, into its log and output/data/stacks/."""
        return stacks.dump_host(self.plan.run_dir, self.plan.output_data_dir, self.host, reason, dump)

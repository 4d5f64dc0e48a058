"""A parameter-server job's verdict, from how its processes end: which role failed on which host, and how.

ps-lite has no failure detection: when one process ends, the others wait for it forever (a worker in its next
push or pull, the servers for its gradients, everyone in the barrier at exit). So every early end is the job's
failure: a worker that exits non-zero; a server or the scheduler that ends before the workers are done (one
that exits 0 is given the workers' finishing time: at the job's end rank 0 tells the servers to stop, moments
before the workers exit); a worker that finishes (its script returns, which rank_program says on its stderr, or it
exits 0) while another still trains long after (workers finish together: ps-lite's barrier at exit holds each
until all arrive, and the one still training waits for the finished one's gradients). And the end: every worker's
script has returned, but some worker never exits (stuck in MXNet's exit: ps-lite's barrier, ZeroMQ's shutdown,
a handler of the script's own): the job has succeeded, the stuck workers are ended and named in the log.

Two pure watches, fed by ps_run.py with `now` (time.monotonic()): HostWatch on every host, over its own
processes' exits; JobWatch on the master, over what every host reports, which decides the job's verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sagemaker_mxnet_horovod.core.exits import EXIT_FAILED
from sagemaker_mxnet_horovod.core.failure import Failure, exit_status
from sagemaker_mxnet_horovod.core.stop import stopped
from sagemaker_mxnet_horovod.diagnose.crashes import NativeCrash
from sagemaker_mxnet_horovod.diagnose.process_failure import process_failure

# After a worker exits 0 (or a server or the scheduler does), how long the other workers may take to exit too.
# ps-lite's barrier at exit (in the kvstore's destructor) releases all workers at once; a worker still running
# this long after another exited is waiting for it, which will never come.
WORKERS_FINISH_TOGETHER_S = 30.0


def role_failure(name: str, role: str, host: str, returncode: int, tail: Sequence[str],
                 crash: NativeCrash | None = None, cause: str | None = None) -> Failure:
    """A process that ended the job: how it ended and its error line ("worker 1 on algo-2 exited with code 1:
    ValueError: ..."); for a server or the scheduler, that it ended before the workers were done. cause: what
    the host knows better (its OOM killer killed the process)."""
    # The job exits as the process did (as an MPI job exits as its first failing rank), 1 for an early exit 0.
    failure = replace(process_failure(name, host, returncode, tuple(tail), crash),
                      exit_code=exit_status(returncode) or EXIT_FAILED)
    if cause:
        return replace(failure, cause=cause)
    if role == "worker":
        return failure
    return replace(failure, cause=f"{failure.cause} before the workers were done (they wait for the {role} forever)")


def left_early(finished: str, waiting: str, host: str) -> Failure:
    """Some workers finished (their script returned, or they exited 0), and `waiting` still trained
    WORKERS_FINISH_TOGETHER_S later."""
    return Failure(f"{finished} finished, and {waiting} still training {WORKERS_FINISH_TOGETHER_S:g} s later: "
                   "parameter-server workers finish together (ps-lite's barrier at exit), so the ones still training "
                   "wait for the others' gradients forever (a worker with fewer steps than the rest, or one that "
                   "ended early)", host=host)


def stopped_job(signum: int, unfinished: Sequence[str]) -> Failure:
    """The job stopped, as the stop path says it (core/stop.py), with how its workers ended."""
    return stopped(signum, "every worker had ended" if not unfinished
                   else f"workers on {', '.join(unfinished)} had not ended within the grace period and were killed")


@dataclass(frozen=True)
class Verdict:
    """The job's outcome: its failure, or None for success; note: what the log should say about how it ended."""

    failure: Failure | None
    note: str | None = None


def stuck_at_exit(hosts: Sequence[str]) -> str:
    """A success whose workers on `hosts` had not exited WORKERS_FINISH_TOGETHER_S after every script returned."""
    return (f"every worker's script returned, but the workers on {', '.join(hosts)} had not exited "
            f"{WORKERS_FINISH_TOGETHER_S:g} s after the last did (stuck in MXNet's exit: ps-lite's barrier, ZeroMQ's "
            "shutdown or an exit handler of the script's): ending them; the job succeeded")


class HostWatch:
    """One host's processes: the first failure among them, when its workers have finished (their script returned,
    or they exited 0) and when they have all exited."""

    def __init__(self, host: str, workers: Sequence[str]):
        self.host, self.workers = host, tuple(workers)  # the names of this host's workers
        self.workers_exited: dict[str, int] = {}  # name -> returncode
        self.finished: dict[str, float] = {}  # worker -> when its script returned or it exited 0
        self.role_done: tuple[Failure, float] | None = None  # a server/scheduler that exited 0, and when
        self.failure: Failure | None = None
        self.stopping = False  # a stop ends processes on purpose: nothing is a failure then

    @property
    def workers_finished(self) -> bool:
        return len(self.finished) == len(self.workers)

    @property
    def workers_ended(self) -> bool:
        return len(self.workers_exited) == len(self.workers)

    @property
    def workers_succeeded(self) -> bool:
        return self.workers_ended and not any(self.workers_exited.values())

    def worker_returned(self, name: str, now: float) -> None:
        """The worker's script returned: it now waits in ps-lite's barrier at exit for the others."""
        self.finished.setdefault(name, now)

    def process_ended(self, name: str, role: str, returncode: int, tail: Sequence[str], now: float,
                      crash: NativeCrash | None = None, cause: str | None = None) -> None:
        if role == "worker":
            self.workers_exited[name] = returncode
            if returncode == 0:
                self.finished.setdefault(name, now)
        if self.stopping or self.failure or (role == "worker" and returncode == 0):
            return  # after the first failure, the rest are its consequences
        failure = role_failure(name, role, self.host, returncode, tail, crash, cause)
        if role != "worker" and returncode == 0:
            self.role_done = self.role_done or (failure, now)
        else:
            self.failure = failure

    def check(self, now: float) -> Failure | None:
        """The host's failure, once there is one: a process's, or a deadline of the watch passed."""
        if self.failure or self.stopping:
            return self.failure
        if self.finished and not self.workers_finished:
            name, at = min(self.finished.items(), key=lambda item: item[1])
            if now - at > WORKERS_FINISH_TOGETHER_S:
                waiting = [worker for worker in self.workers if worker not in self.finished]
                verb = "was" if len(waiting) == 1 else "were"
                self.failure = left_early(f"{name} on {self.host}", f"{', '.join(waiting)} on {self.host} {verb}",
                                          self.host)
        # Once this host's workers have finished, the job's watch judges the other hosts' (JobWatch).
        if (self.role_done and not self.failure and not self.workers_finished
                and now - self.role_done[1] > WORKERS_FINISH_TOGETHER_S):
            self.failure = self.role_done[0]
        return self.failure

    def next_deadline(self) -> float | None:
        """When check() may next find a failure without a new exit (None: only an exit can)."""
        if self.failure or self.stopping or self.workers_finished:
            return None
        starts = [at for _, at in filter(None, [self.role_done])] + list(self.finished.values())
        return min(starts) + WORKERS_FINISH_TOGETHER_S if starts else None


class JobWatch:
    """The master's view: what every host reported (its failure, its workers finished, then ended, a stop), and the
    verdict."""

    def __init__(self, hosts: Sequence[str], stop_grace_s: float):
        self.hosts, self.stop_grace_s = tuple(hosts), stop_grace_s
        self.failure: Failure | None = None
        self.finished: dict[str, float] = {}  # host -> when all of its workers had finished
        self.succeeded: set[str] = set()  # hosts whose workers have all exited 0
        self.ended: set[str] = set()  # hosts whose workers have all exited, whatever their exit codes
        self.stop: tuple[int, float] | None = None  # the stop signal, and when

    def host_failed(self, failure: Failure) -> None:
        if self.failure is None and self.stop is None:
            self.failure = failure

    def workers_finished(self, host: str, now: float) -> None:
        self.finished.setdefault(host, now)

    def workers_ended(self, host: str, succeeded: bool, now: float) -> None:
        self.ended.add(host)
        if succeeded:
            self.succeeded.add(host)
            self.finished.setdefault(host, now)

    def stop_requested(self, signum: int, now: float) -> None:
        if self.stop is None:
            self.stop = (signum, now)

    def verdict(self, now: float) -> Verdict | None:
        """The job's outcome once it is known, else None."""
        if self.stop:
            signum, at = self.stop
            unfinished = [host for host in self.hosts if host not in self.ended]
            return Verdict(stopped_job(signum, unfinished)) if not unfinished or now > at + self.stop_grace_s else None
        if self.failure:
            return Verdict(self.failure)
        if len(self.succeeded) == len(self.hosts):
            return Verdict(None)
        if len(self.finished) == len(self.hosts) and now - max(self.finished.values()) > WORKERS_FINISH_TOGETHER_S:
            return Verdict(None, stuck_at_exit([host for host in self.hosts if host not in self.succeeded]))
        if self.finished and len(self.finished) < len(self.hosts):
            first, at = min(self.finished.items(), key=lambda item: item[1])
            if now - at > WORKERS_FINISH_TOGETHER_S:
                waiting = [host for host in self.hosts if host not in self.finished]
                return Verdict(left_early(f"the workers on {first}", f"those on {', '.join(waiting)} were", first))
        return None

    def next_deadline(self) -> float | None:
        if self.stop:
            return self.stop[1] + self.stop_grace_s
        if self.failure or not self.finished or len(self.succeeded) == len(self.hosts):
            return None
        # Hosts still training: counted from the first to finish; every host finished: from the last.
        times = self.finished.values()
        return (min(times) if len(self.finished) < len(self.hosts) else max(times)) + WORKERS_FINISH_TOGETHER_S

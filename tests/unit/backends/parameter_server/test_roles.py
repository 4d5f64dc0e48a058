"""roles.py: a parameter-server job's verdict from how its processes end: each host's watch (a failed worker, a
server or scheduler that ends before the workers, a worker that leaves the others behind) and the master's
(the first failure, every host's workers done, a stop, hosts that finish apart)."""

import signal

import pytest
from sagemaker_mxnet_horovod.backends.parameter_server.roles import (
    WORKERS_FINISH_TOGETHER_S,
    HostWatch,
    JobWatch,
    Verdict,
    role_failure,
)
from sagemaker_mxnet_horovod.diagnose.crashes import NativeCrash

LATER = WORKERS_FINISH_TOGETHER_S + 1
TAIL = ("Traceback (most recent call last):", "ValueError: rank 1 was asked to fail")


def test_a_worker_failure_names_it_its_host_and_error():
    failure = role_failure("worker 1", "worker", "algo-2", 1, TAIL)
    assert failure.cause == "worker 1 on algo-2 exited with code 1: ValueError: rank 1 was asked to fail"
    assert (failure.host, failure.tail_title, failure.exit_code) == ("algo-2", "worker 1 stderr", 1)
    assert role_failure("worker 0", "worker", "algo-1", 2, ()).exit_code == 2  # the job exits as it did
    assert role_failure("worker 0", "worker", "algo-1", -9, ()).exit_code == 137


@pytest.mark.parametrize("role,returncode,how", [
    ("server", -9, "server 0 on algo-1 was killed by SIGKILL"),
    ("scheduler", 0, "scheduler on algo-1 exited with code 0"),
])
def test_a_server_or_scheduler_failure_says_it_ended_before_the_workers(role, returncode, how):
    name = "scheduler" if role == "scheduler" else "server 0"
    failure = role_failure(name, role, "algo-1", returncode, ())
    assert failure.cause == f"{how} before the workers were done (they wait for the {role} forever)"
    assert failure.exit_code == (137 if returncode else 1)  # an early exit 0 is a failure: 1


def test_a_crash_is_named_with_its_signal():
    failure = role_failure("server 0", "server", "algo-2", 255, ("Segmentation fault: 11",), NativeCrash(11))
    assert failure.cause.startswith("server 0 on algo-2 crashed with SIGSEGV (segmentation fault); then it exited "
                                    "with code 255 before the workers were done")


def test_host_watch_a_failed_worker_is_the_hosts_failure_and_what_follows_is_not():
    watch = HostWatch("algo-2", ["worker 2", "worker 3"])
    watch.process_ended("worker 3", "worker", 1, TAIL, now=10)
    watch.process_ended("server 1", "server", -15, (), now=11)  # ended because of it
    assert watch.check(11).cause.startswith("worker 3 on algo-2 exited with code 1: ValueError")
    assert watch.next_deadline() is None


def test_host_watch_every_worker_done_is_not_a_failure():
    watch = HostWatch("algo-1", ["worker 0", "worker 1"])
    watch.process_ended("worker 0", "worker", 0, (), now=10)
    assert not watch.workers_ended and watch.next_deadline() == 10 + WORKERS_FINISH_TOGETHER_S
    watch.process_ended("worker 1", "worker", 0, (), now=11)
    watch.process_ended("server 0", "server", 0, (), now=11.5)  # told to stop by rank 0 at the end
    assert watch.workers_ended and watch.workers_succeeded and watch.check(10 + LATER) is None
    assert watch.next_deadline() is None  # the other hosts' workers are the master's to judge


def test_host_watch_a_worker_still_running_long_after_another_left():
    watch = HostWatch("algo-1", ["worker 0", "worker 1"])
    watch.process_ended("worker 0", "worker", 0, (), now=10)
    assert watch.check(10 + WORKERS_FINISH_TOGETHER_S - 1) is None
    failure = watch.check(10 + LATER)
    assert failure.cause.startswith(f"worker 0 on algo-1 finished, and worker 1 on algo-1 was still training "
                                    f"{WORKERS_FINISH_TOGETHER_S:g} s later: parameter-server workers finish together")


def test_host_watch_a_worker_whose_script_returned_has_finished_though_still_in_the_barrier():
    # The classic dist_sync hang: a worker with fewer steps returns and waits in ps-lite's barrier at exit, the
    # other waits for its gradients; no process ends.
    watch = HostWatch("algo-1", ["worker 0", "worker 1"])
    watch.worker_returned("worker 1", now=10)
    assert not watch.workers_ended and watch.next_deadline() == 10 + WORKERS_FINISH_TOGETHER_S
    assert watch.check(10 + LATER).cause.startswith("worker 1 on algo-1 finished, and worker 0 on algo-1 was still "
                                                    "training")
    together = HostWatch("algo-1", ["worker 0", "worker 1"])
    together.worker_returned("worker 0", now=10)
    together.worker_returned("worker 1", now=11)
    assert together.workers_finished and together.check(10 + LATER) is None and together.next_deadline() is None


def test_host_watch_a_server_that_exits_0_is_given_the_workers_finishing_time():
    watch = HostWatch("algo-2", ["worker 1"])
    watch.process_ended("server 1", "server", 0, (), now=10)
    assert watch.check(11) is None and watch.next_deadline() == 10 + WORKERS_FINISH_TOGETHER_S
    assert watch.check(10 + LATER).cause == ("server 1 on algo-2 exited with code 0 before the workers were done "
                                             "(they wait for the server forever)")


def test_host_watch_while_stopping_nothing_is_a_failure():
    watch = HostWatch("algo-1", ["worker 0"])
    watch.stopping = True
    watch.process_ended("worker 0", "worker", 143, (), now=10)
    watch.process_ended("server 0", "server", -15, (), now=11)
    assert watch.check(100) is None and watch.workers_ended and not watch.workers_succeeded


def test_job_watch_success_once_every_hosts_workers_exited_0():
    job = JobWatch(("algo-1", "algo-2"), stop_grace_s=110)
    job.workers_ended("algo-2", True, now=10)
    assert job.verdict(11) is None and job.next_deadline() == 10 + WORKERS_FINISH_TOGETHER_S
    job.workers_finished("algo-1", now=11)  # its script returned: the barrier at exit, then the exit
    assert job.verdict(12) is None and job.next_deadline() == 11 + WORKERS_FINISH_TOGETHER_S
    job.workers_ended("algo-1", True, now=12)
    assert job.verdict(12) == Verdict(None) and job.next_deadline() is None


def test_job_watch_workers_stuck_at_exit_after_every_script_returned_end_in_success_named():
    # Every script returned (algo-2's workers at 10, algo-1's at 14); algo-1's exited, algo-2's never did.
    job = JobWatch(("algo-1", "algo-2"), stop_grace_s=110)
    job.workers_finished("algo-2", now=10)
    job.workers_finished("algo-1", now=14)
    job.workers_ended("algo-1", True, now=15)
    deadline = 14 + WORKERS_FINISH_TOGETHER_S  # from the last script's return, not the first
    assert job.next_deadline() == deadline and job.verdict(deadline) is None
    assert job.verdict(deadline + 0.5) == Verdict(None, (
        f"every worker's script returned, but the workers on algo-2 had not exited {WORKERS_FINISH_TOGETHER_S:g} s "
        "after the last did (stuck in MXNet's exit: ps-lite's barrier, ZeroMQ's shutdown or an exit handler of the "
        "script's): ending them; the job succeeded"))


def test_job_watch_a_host_not_finished_is_not_stuck_at_exit():
    job = JobWatch(("algo-1", "algo-2"), stop_grace_s=110)
    job.workers_finished("algo-1", now=10)
    assert job.verdict(10 + LATER).failure.cause.startswith("the workers on algo-1 finished, and those on algo-2 were "
                                                            "still training")


def test_job_watch_the_first_failure_wins():
    job = JobWatch(("algo-1", "algo-2"), stop_grace_s=110)
    first = role_failure("worker 1", "worker", "algo-2", 1, TAIL)
    job.host_failed(first)
    job.host_failed(role_failure("server 0", "server", "algo-1", -15, ()))
    assert job.verdict(1) == Verdict(first)


def test_job_watch_hosts_that_finish_apart():
    job = JobWatch(("algo-1", "algo-2", "algo-3"), stop_grace_s=110)
    job.workers_ended("algo-2", True, now=10)
    failure = job.verdict(10 + LATER).failure
    assert failure.cause.startswith(f"the workers on algo-2 finished, and those on algo-1, algo-3 were still "
                                    f"training {WORKERS_FINISH_TOGETHER_S:g} s later")
    assert failure.host == "algo-2"


def test_job_watch_a_stop_waits_for_every_hosts_workers_and_wins_over_failures():
    job = JobWatch(("algo-1", "algo-2"), stop_grace_s=110)
    job.stop_requested(signal.SIGTERM, now=10)
    job.host_failed(role_failure("worker 1", "worker", "algo-2", 143, ()))  # the stop's doing
    job.workers_ended("algo-1", False, now=12)
    assert job.verdict(13) is None and job.next_deadline() == 120
    job.workers_ended("algo-2", False, now=14)
    stopped = job.verdict(14).failure
    assert (stopped.exit_code, stopped.signal_number) == (143, signal.SIGTERM)
    assert stopped.cause == "stopped by SIGTERM (SageMaker stop or spot interruption); every worker had ended"


def test_job_watch_a_stop_ends_after_its_grace_naming_the_hosts_not_done():
    job = JobWatch(("algo-1", "algo-2"), stop_grace_s=110)
    job.stop_requested(signal.SIGTERM, now=10)
    job.workers_ended("algo-1", False, now=12)
    assert job.verdict(121).failure.cause.endswith("workers on algo-2 had not ended within the grace period and were "
                                                   "killed")

"""The fault suite's parameter-server scenarios (sagemaker_parameter_server_enabled=true): the user's dist_sync
script, each host's own scheduler, servers and workers, no mpirun. ps-lite leaves every other process waiting
forever when one ends: every scenario is one process's end, or a server that stops answering, or a stop."""

from __future__ import annotations

from fault_harness import CODE_DIR, JOB_TIMEOUT_S, KILLED, NONZERO, Context, Scenario
from fault_jobs import checkpoint_saved_on_stop, master_said, mnist_job, start_warning_said
from local_job import JobSpec, RunningJob

# Inside a container: send a signal (SIGKILL unless named) to the process of a role (its DMLC_ROLE; servers and the
# scheduler run `import mxnet`).
SIGNAL_ROLE = """
import os, signal, sys
role = sys.argv[1]
signum = getattr(signal, sys.argv[2]) if len(sys.argv) > 2 else signal.SIGKILL
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
    except OSError:
        continue
    if f"DMLC_ROLE={role}".encode() in environ:
        os.kill(int(pid), signum)
        print("signalled", role, pid, signum.name)
        break
else:
    sys.exit(f"no {role} process")
"""


def ps_job(ctx: Context, hps=None, **spec) -> JobSpec:
    hyperparameters = {"sagemaker_program": "kvstore_sum.py", "sagemaker_submit_directory": "/opt/ml/code",
                       "sagemaker_parameter_server_enabled": "true", "mpi_peer_timeout_s": "60", **(hps or {})}
    return JobSpec(image=ctx.image, hosts=2, hyperparameters=hyperparameters, code_dir=CODE_DIR,
                   timeout_s=JOB_TIMEOUT_S, **spec)


def ps_worker_fault(mode: str):
    """Worker 1 (on algo-2) fails after its first sum while worker 0 keeps pushing."""
    return lambda ctx: ps_job(ctx, hps={"fail-worker": "1", "fail-mode": mode, "extra-steps": "600"})


def kill_ps_role(host: str, role: str):
    """Once worker 0 has its first sum (training under way), SIGKILL `role`'s process on `host`."""

    def inject(job: RunningJob) -> None:
        job.wait_for_log("algo-1", "worker 0 (kvstore rank", timeout=120)
        job.mark_fault()
        job.exec(host, "python", "-c", SIGNAL_ROLE, role)

    return lambda ctx: ps_job(ctx, hps={"extra-steps": "600"}, during=inject)


def server_stopped(program: str):
    """Once worker 0 has trained a few steps, SIGSTOP algo-2's server: alive, it answers no push or pull, and every
    worker waits on MXNet's engine for ever. program: "script", the user's dist_sync script (a line per step, each
    step also summing a key every server holds), or "mnist", the built-in MNIST with kvstore=dist_sync."""

    def build(ctx: Context) -> JobSpec:
        def inject(job: RunningJob) -> None:
            job.wait_for_log("algo-1", "worker 0: step 5" if program == "script" else " batch=", timeout=120)
            job.mark_fault()
            job.exec("algo-2", "python", "-c", SIGNAL_ROLE, "server", "SIGSTOP")

        if program == "script":
            return ps_job(ctx, hps={"extra-steps": "600", "log-steps": "true", "wide-key": "true",
                                    "mpi_progress_timeout_s": "10"}, during=inject)
        return mnist_job(ctx, hps={"epochs": "50", "log-interval": "5", "kvstore": "dist_sync",
                                   "mpi_progress_timeout_s": "10"}, during=inject)

    return build


def kill_when_ps_training(host: str):
    """Once worker 0 has its first sum, SIGKILL `host`'s container."""
    def inject(job: RunningJob) -> None:
        job.wait_for_log("algo-1", "worker 0 (kvstore rank", timeout=120)
        job.signal(host, "KILL")

    return inject


def sigterm_during_ps_mnist(ctx: Context) -> JobSpec:
    """StopTrainingJob on a parameter-server job: SIGTERM to every host once worker 0 has logged a batch."""

    def inject(job: RunningJob) -> None:
        job.wait_for_log("algo-1", " batch=", timeout=120)
        job.mark_fault()
        for host in ("algo-1", "algo-2"):
            job.signal(host, "TERM")

    return mnist_job(ctx, hps={"epochs": "50", "log-interval": "5", "kvstore": "dist_sync"}, during=inject)


# A worker's progress watch ended it, waiting on MXNet's engine for the servers (a 10 s mpi_progress_timeout_s).
WORKER_WAITED_ON_SERVERS = (r"^worker [01] on algo-[12] exited with code 124: train: no progress: rank [01] on "
                            r"algo-[12] wrote no output, started no collective and did not compute for 10 s "
                            r"\(mpi_progress_timeout_s\); blocked in ndarray\.py:\d+ ")


PS_SCENARIOS = [
    Scenario("parameter server: a worker raises", "both fail; failure names worker 1 on algo-2 and the exception",
             ps_worker_fault("raise"), exits=(1, 1), fault="rank", toolkit=False,
             failure=r"^worker 1 on algo-2 exited with code 1: ValueError: worker 1 was asked to fail",
             worker_failure=r"^host algo-2: the job failed on algo-1: worker 1 on algo-2 exited with code 1"),
    Scenario("parameter server: a worker with fewer steps returns early", "both fail within the workers' finishing "
             "time (30 s): each waits for the other forever", ps_worker_fault("return"), exits=(1, 1), fault="rank",
             toolkit=False,
             failure=r"^the workers on algo-2 finished, and those on algo-1 were still training 30 s later"),
    Scenario("parameter server: a worker never exits after its script returned", "success within the workers' "
             "finishing time (30 s) and the end's grace: the stuck workers ended and named in the log",
             lambda ctx: ps_job(ctx, hps={"fail-worker": "1", "fail-mode": "hang-at-exit"}), exits=(0, 0),
             fault="rank", toolkit=False, max_seconds=90,
             check=master_said(r"every worker's script returned, but the workers on (algo-1, )?algo-2 had not exited "
                               r"30 s after the last did \(stuck in MXNet's exit: .*\): ending them; the job "
                               r"succeeded")),
    Scenario("parameter server: a worker out of memory", "both fail; failure says algo-2 ran out of memory, "
             "naming worker 1, the limit and the peak",
             lambda ctx: ps_job(ctx, hps={"fail-worker": "1", "fail-mode": "oom", "extra-steps": "600"},
                                memory={"algo-2": "768m"}),
             exits=(NONZERO, NONZERO), fault="rank", toolkit=False,
             failure=r"^algo-2 ran out of memory: the kernel's OOM killer killed worker 1 \(SIGKILL\); container "
                     r"limit 768 MiB, peak usage [\d.]+ MiB of 768 MiB",
             worker_failure=r"^host algo-2: the job failed on algo-1: algo-2 ran out of memory"),
    Scenario("parameter server: a worker dies of a full /dev/shm", "both fail; failure names /dev/shm, worker 1 on "
             "algo-2, size, need and fixes; the start log warned",
             # As the MPI row: a 16 MiB /dev/shm, 2 data-loader workers per worker counted; worker 1 writes 64 MiB.
             lambda ctx: ps_job(ctx, hps={"fail-worker": "1", "fail-mode": "shm", "extra-steps": "600",
                                          "num_workers": "2"}, shm_size="16m"),
             exits=(NONZERO, NONZERO), fault="rank", toolkit=False,
             failure=r"^/dev/shm too small: worker 1 on algo-2 died of Bus error: SIGBUS on a page of a full /dev/shm "
                     r"\(.*\); /dev/shm there is 16 MiB, smaller than the about 128 MiB .* Fix: a larger /dev/shm: "
                     r"docker run --shm-size=1g",
             worker_failure=r"^host algo-2: the job failed on algo-1: /dev/shm too small: worker 1 on algo-2",
             check=start_warning_said("WARNING: /dev/shm is 16 MiB, less than the about 128 MiB (1 rank x 2 "
                                      "data-loader workers (num_workers) x 64 MiB) this job needs")),
    Scenario("parameter server: a server killed", "both fail naming the server on algo-2 and SIGKILL",
             kill_ps_role("algo-2", "server"), exits=(NONZERO, NONZERO), fault="injected", toolkit=False,
             failure=r"^server 1 on algo-2 was killed by SIGKILL before the workers were done",
             worker_failure=r"^host algo-2: the job failed on algo-1: server 1 on algo-2 was killed by SIGKILL"),
    Scenario("parameter server: the scheduler killed", "both fail naming the scheduler on algo-1 and SIGKILL",
             kill_ps_role("algo-1", "scheduler"), exits=(NONZERO, NONZERO), fault="injected", toolkit=False,
             failure=r"^scheduler on algo-1 was killed by SIGKILL before the workers were done",
             worker_failure=r"^host algo-2: the job failed on algo-1: scheduler on algo-1 was killed"),
    # The scheduler's port (_ps_port) is the launcher's check-in port (mpi_handshake_port, 7420), which the master
    # holds: ps-lite's scheduler cannot bind it and exits, saying so.
    Scenario("parameter server: the scheduler never starts", "both fail naming the scheduler and its bind failure: "
             "its port (_ps_port) is the handshake's", lambda ctx: ps_job(ctx, hps={"_ps_port": "7420"}),
             exits=(NONZERO, NONZERO), toolkit=False, max_seconds=45,
             failure=r"^scheduler on algo-1 exited with code 1: MXNetError: Check failed: my_node_\.port != -1 "
                     r"\(-1 vs\. -1\) : bind failed before the workers were done",
             worker_failure=r"^host algo-2: the job failed on algo-1: scheduler on algo-1 exited with code 1: "
                            r"MXNetError: .*bind failed"),
    Scenario("parameter server: a server stops answering", "both fail within 45 s of the stop (a 10 s progress "
             "timeout), naming a waiting worker", server_stopped("script"),
             exits=(NONZERO, NONZERO), fault="injected", toolkit=False, max_seconds=45, alone=True,
             failure=WORKER_WAITED_ON_SERVERS + r"\(wait_to_read\) called from kvstore_sum\.py:\d+"),
    Scenario("parameter server: a server stops answering MNIST", "both fail within 45 s of the stop (a 10 s "
             "progress timeout), naming a waiting worker", server_stopped("mnist"),
             exits=(NONZERO, NONZERO), fault="injected", toolkit=False, max_seconds=45, alone=True,
             failure=WORKER_WAITED_ON_SERVERS + r"\(\w+\) called from"),
    Scenario("parameter server: workers sum 20 s, 10 s progress timeout", "success: waiting on the servers' "
             "answers, briefly, is not a hang",
             lambda ctx: ps_job(ctx, hps={"extra-steps": "150", "log-steps": "true", "wide-key": "true",
                                          "mpi_progress_timeout_s": "10"}),
             exits=(0, 0), toolkit=False, max_seconds=120, alone=True),
    Scenario("parameter server: a host's container killed", "the master stops the job, names algo-2",
             lambda ctx: ps_job(ctx, hps={"extra-steps": "600"}, during=kill_when_ps_training("algo-2")),
             exits=(1, KILLED), fault="injected", toolkit=False,
             failure=r"^host algo-2 went away during the job"),
    Scenario("parameter server: SIGTERM to every host", "as StopTrainingJob: the workers checkpoint, both exit 143",
             sigterm_during_ps_mnist, exits=(143, 143), fault="injected", max_seconds=120, toolkit=False,
             failure=r"^stopped by SIGTERM", check=checkpoint_saved_on_stop),
]

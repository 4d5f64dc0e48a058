"""Fault scenarios across real containers, as data: how to cause the fault, what every host must do.

Each scenario builds a local_job.JobSpec (optionally with a `during` injector that kills or signals a
container at a chosen moment) and states the expected exit code of every host, the first line of the
master's (and, where it matters, the worker's) /opt/ml/output/failure, and how many seconds may pass from
the fault to the last container's exit. `run_scenario` runs one under this image's launcher or under the
sagemaker-training toolkit's MPI runner (same image) and returns an Observation for the report.

The moment of the fault: the job's start for configuration faults, the injector's action for container
faults, and the failing rank's own record (allreduce.py writes output/data/fault-at) for rank faults.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from local_job import DOCKER, Channel, JobSpec, RunningJob, run_job
from sagemaker_mxnet_horovod import __version__ as LAUNCHER_VERSION
from toolkit_job import as_toolkit_job

ROOT = Path(__file__).resolve().parents[2]

CODE_DIR = ROOT / "tests" / "integration" / "code"
FAULT_CODE_DIR = ROOT / "tests" / "faults" / "code"  # programs only this suite runs
OBSERVATIONS: list = []  # filled by test_faults.py, printed as the report table by conftest.py
JOB_TIMEOUT_S = 240.0  # the harness kills a job still running after this (the toolkit waits up to an hour)

# The first line of the failure file when the MNIST program rejects its input on a rank (exit 2, before training).
MNIST_ERROR = r"^rank [01] on algo-[12] exited with code 2: mnist: error: "

# Expected exit codes: an int, or one of these.
NONZERO = "non-zero"
KILLED = "killed"  # the container we killed: 137


@dataclasses.dataclass
class Context:
    image: str
    workdir: Path
    mnist: Path  # synth-data mnist output: train/ and test/
    shards: Path  # per-rank RecordIO shards train_0, train_1
    launcher: str = "ours"  # ours | toolkit
    saved_checkpoint: dict = dataclasses.field(default_factory=dict)  # disk-full scenario: name -> sha256


@dataclasses.dataclass
class Scenario:
    name: str
    expected: str  # one line for the report
    build: Callable[[Context], JobSpec]
    exits: tuple  # per host: int, NONZERO or KILLED
    failure: str | None = None  # regex the master's failure file's first line must match
    worker_failure: str | None = None  # same for algo-2
    fault: str = "start"  # start | injected | rank: where the fault time comes from
    max_seconds: float = 60.0  # fault to last exit
    check: Callable[[Context, object], list] | None = None  # extra checks: returns problems
    toolkit: bool = True  # does the scenario apply to the toolkit's runner


@dataclasses.dataclass
class Observation:
    scenario: str
    launcher: str
    expected: str
    exits: list
    failure: str  # master's first failure line ("" when none)
    seconds: float | None  # fault to last exit; None when a host never exited
    problems: list
    harness_error: str | None = None  # the harness itself failed: the scenario was not observed

    @property
    def passed(self) -> bool:
        return not self.problems and self.harness_error is None

    @property
    def result(self) -> str:
        return "ERROR" if self.harness_error is not None else "pass" if self.passed else "FAIL"

    @property
    def observed(self) -> str:
        if self.harness_error is not None:
            return f"harness error: {self.harness_error}"
        codes = "/".join("-" if c is None else str(c) for c in self.exits)
        return f"exit {codes}" + (f"; {self.failure}" if self.failure else "; no failure file")


def harness_error_observation(scenario: Scenario, launcher: str, error: BaseException) -> Observation:
    """The Observation of a scenario whose harness failed (the job could not be built, run or judged): it
    counts, and shows, as not as expected."""
    text = f"{type(error).__name__}: {first_line(str(error))}"
    return Observation(scenario.name, launcher, scenario.expected, [], "", None, [text], harness_error=text)


def summary(observations: list) -> str:
    """'N/M as expected', and how many of the M the harness could not observe."""
    errors = sum(o.harness_error is not None for o in observations)
    return (f"{sum(o.passed for o in observations)}/{len(observations)} as expected"
            + (f", {errors} harness error{'s' if errors > 1 else ''}" if errors else ""))


# ---------------------------------------------------------------------------------------------------------
# Job builders.


def allreduce_job(ctx: Context, hps=None, env=None, **spec) -> JobSpec:
    hyperparameters = {"sagemaker_program": "allreduce.py", "sagemaker_submit_directory": "/opt/ml/code",
                       "mpi_peer_timeout_s": "60", **(hps or {})}
    return JobSpec(image=ctx.image, hosts=2, hyperparameters=hyperparameters, env=env or {}, code_dir=CODE_DIR,
                   timeout_s=JOB_TIMEOUT_S, **spec)


def mnist_job(ctx: Context, channels=None, hps=None, **spec) -> JobSpec:
    data = ctx.mnist
    if channels is None:
        channels = [Channel("train", data / "train"), Channel("test", data / "test")]
    hyperparameters = {"sagemaker_program": "mnist", "epochs": "1", "batch-size": "64", "mpi_peer_timeout_s": "60",
                       "tensorboard": "false", **(hps or {})}
    return JobSpec(image=ctx.image, hosts=2, hyperparameters=hyperparameters, channels=channels,
                   timeout_s=JOB_TIMEOUT_S, **spec)


def rank_fault(mode: str, rank: int = 1):
    """Rank `rank` (on algo-2) fails after the first allreduce while the others keep training."""
    # As hyperparameters, not environment: the toolkit's mpirun does not pass the job's environment to ranks on
    # other hosts, so only arguments reach rank 1 under both launchers.
    return lambda ctx: allreduce_job(ctx, hps={"fail-rank": str(rank), "fail-mode": mode, "extra-steps": "600"})


def native_crash(handler: str):
    """Rank 1 (on algo-2) reads address 0 in native code after hvd.init() (code/native_crash.py); `handler`
    (mxnet or open-mpi) reports it."""
    hyperparameters = {"sagemaker_program": "native_crash.py", "sagemaker_submit_directory": "/opt/ml/code",
                       "mpi_peer_timeout_s": "60", "handler": handler}
    return lambda ctx: JobSpec(image=ctx.image, hosts=2, hyperparameters=hyperparameters, code_dir=FAULT_CODE_DIR,
                               timeout_s=JOB_TIMEOUT_S)


def rank_out_of_memory(ctx: Context) -> JobSpec:
    # Rank 1 grows past algo-2's container limit (docker --memory, no swap): the kernel's OOM killer ends it.
    return allreduce_job(ctx, hps={"fail-rank": "1", "fail-mode": "oom", "extra-steps": "600"},
                         memory={"algo-2": "768m"})


def rank_fills_dev_shm(ctx: Context) -> JobSpec:
    # Docker's /dev/shm shrunk to 16 MiB: the launcher warns at the start (2 data-loader workers per rank need more),
    # then rank 1 writes a 64 MiB batch there and dies of SIGBUS.
    return allreduce_job(ctx, hps={"fail-rank": "1", "fail-mode": "shm", "extra-steps": "600", "num_workers": "2"},
                         shm_size="16m")


def start_warning_said(text: str):
    def check(ctx: Context, result) -> list:
        return [] if all(text in host.logs for host in result.hosts) else [f"a host's log lacks {text!r}"]

    return check


def kill_when_training(host: str, signal_name: str = "KILL"):
    """An injector: once rank 0 has done its first allreduce (training is under way), signal `host`."""

    def inject(job: RunningJob) -> None:
        job.wait_for_log("algo-1", "rank 0/2", timeout=120)
        job.signal(host, signal_name)

    return inject


def container_fault(host: str, signal_name: str = "KILL"):
    return lambda ctx: allreduce_job(ctx, hps={"extra-steps": "600"}, during=kill_when_training(host, signal_name))


def sigterm_during_mnist(hosts: tuple):
    """SageMaker's StopTrainingJob (or a spot interruption): SIGTERM once rank 0 has logged a batch."""

    def build(ctx: Context) -> JobSpec:
        def inject(job: RunningJob) -> None:
            job.wait_for_log("algo-1", " batch=", timeout=120)
            job.mark_fault()
            for host in hosts:
                job.signal(host, "TERM")

        return mnist_job(ctx, hps={"epochs": "50", "log-interval": "5"}, during=inject)

    return build


def stacks_written(*expected: tuple):
    """A check: the hang watch that ended the job wrote every rank's stacks. expected: (host whose output holds the
    dump, the rank's file, a text its stacks must contain)."""

    def check(ctx: Context, result) -> list:
        problems = []
        roots = {host.name: host.root for host in result.hosts}
        for host, name, text in expected:
            files = sorted((roots[host] / "output" / "data" / "stacks").glob(f"*/{name}"))
            if not files:
                problems.append(f"no stacks/*/{name} in {host}'s output/data")
            elif not any(text in path.read_text() for path in files):
                problems.append(f"{host}'s stacks/*/{name} lack {text!r}: {files[-1].read_text()[-600:]!r}")
        return problems

    return check


def checkpoint_saved_on_stop(ctx: Context, result) -> list:
    names = sorted(p.name for p in (result.master.root / "checkpoints").glob("*.json"))
    mid_epoch = [n for n in names if "-batch-" in n]
    return [] if mid_epoch else [f"no mid-epoch checkpoint in algo-1's /opt/ml/checkpoints: {names}"]


def worker_name_late(ctx: Context) -> JobSpec:
    # algo-2 runs from the start, but its name resolves only 6 s later (SageMaker's DNS can lag): it checks
    # in at once; the master must wait for the name before mpirun uses it.
    return allreduce_job(ctx, network_alias_delays={"algo-2": 6})


def master_starts_late(ctx: Context) -> JobSpec:
    # The master's container starts 8 s after the worker's: until then the worker cannot resolve algo-1.
    return allreduce_job(ctx, start_delays={"algo-1": 8})


def never_resolves(ctx: Context) -> JobSpec:
    return allreduce_job(ctx, hps={"mpi_peer_timeout_s": "10"}, network_alias_delays={"algo-2": 3600})


def daemon_fails_on_worker(ctx: Context) -> JobSpec:
    # algo-2's cluster interface is renamed eth1 (reconnected, not renamed back) after it checked in: mpirun's
    # daemon there finds no eth0, dies, and mpirun waits for it forever. The launcher's own watch ends it.
    return allreduce_job(ctx, hps={"mpi_peer_timeout_s": "15"}, network_alias_delays={"algo-2": 1},
                         keep_eth0=False)


def pipe_readers_stall(ctx: Context) -> JobSpec:
    # Two ranks per host read one Pipe channel (a script written for File mode): the first drains the FIFO,
    # the second blocks in open() for ever, and the first waits in its next allreduce for the second.
    return allreduce_job(ctx, hps={"sagemaker_mpi_num_of_processes_per_host": "2", "read-pipe-channel": "train",
                                   "extra-steps": "600", "horovod_stall_timeout_s": "10"},
                         channels=[Channel("train", ctx.shards / "train_0", "Pipe")])


def rank_hangs_outside_collectives(ctx: Context) -> JobSpec:
    # Rank 1 blocks reading a pipe nobody writes; rank 0 waits in its next allreduce. The stall timeout is
    # left at its default (an hour): the progress watch is what ends it.
    return allreduce_job(ctx, hps={"fail-rank": "1", "fail-mode": "hang", "extra-steps": "600",
                                   "mpi_progress_timeout_s": "10"})


def solo_work_within_timeouts(ctx: Context) -> JobSpec:
    # Rank 0 works alone for 16 s (printing, as a validation pass would) while rank 1 waits silently in an
    # allreduce: longer than the progress timeout and Horovod's stall warning, shorter than the stall timeout.
    return allreduce_job(ctx, hps={"fail-rank": "0", "fail-mode": "solo", "solo-seconds": "16", "extra-steps": "5",
                                   "horovod_stall_timeout_s": "40", "mpi_progress_timeout_s": "6"})


def partition_mid_allreduce(ctx: Context) -> JobSpec:
    def inject(job: RunningJob) -> None:
        job.wait_for_log("algo-1", "rank 0/2", timeout=120)
        job.disconnect("algo-2")

    return allreduce_job(ctx, hps={"extra-steps": "6000"}, during=inject)


def config_file(name: str, text: str):
    return lambda ctx: allreduce_job(ctx, config_files={name: text})


def corrupt_train_channel(ctx: Context) -> JobSpec:
    corrupt = ctx.workdir / "corrupt-train"
    shutil.copytree(ctx.mnist / "train", corrupt)
    images = next(p for p in corrupt.iterdir() if "images" in p.name)
    images.write_bytes(images.read_bytes()[: 16 + 28 * 28 * 10 + 5])  # the header says 6000 images: 10 are there
    return mnist_job(ctx, channels=[Channel("train", corrupt), Channel("test", ctx.mnist / "test")])


# Disk full while saving: algo-1's /opt/ml/checkpoints is a small tmpfs (mounted on the host, so it
# outlives the containers) holding a finished checkpoint and filled to the last byte; the job resumes,
# trains one more epoch and cannot save it. Needs root on the host (CI and the dev machines run as root).

def checkpoint_fs(ctx: Context) -> Path:
    return ctx.workdir / "checkpoint-fs"


def file_digests(directory: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def disk_full_job(ctx: Context) -> JobSpec:
    fs = checkpoint_fs(ctx)
    fs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(fs)], check=True, capture_output=True)
    # Setup, not the scenario: one epoch on one host with this image's launcher writes the checkpoint.
    first = dataclasses.replace(mnist_job(ctx), hosts=1, volumes={"algo-1": [(str(fs), "/opt/ml/checkpoints")]})
    result = run_job(first, ctx.workdir / "epoch-1")
    if result.exit_codes != [0] or not any(fs.glob("*.params")):
        raise RuntimeError("the first epoch of the disk-full scenario failed:\n" + result.describe())
    ctx.saved_checkpoint = file_digests(fs)
    with open(fs / "filler", "wb", buffering=0) as filler:  # to the last byte: ENOSPC ends the loop
        for block in (65536, 4096, 512, 1):
            try:
                while True:
                    filler.write(b"\0" * block)
            except OSError:
                pass
    return mnist_job(ctx, hps={"epochs": "2"}, volumes={"algo-1": [(str(fs), "/opt/ml/checkpoints")]})


def previous_checkpoint_survives(ctx: Context, result) -> list:
    fs = checkpoint_fs(ctx)
    try:
        names = sorted(p.name for p in fs.iterdir())
        now = file_digests(fs)
    finally:
        subprocess.run(["umount", str(fs)], capture_output=True, check=False)
    problems = []
    changed = [name for name, digest in ctx.saved_checkpoint.items() if now.get(name) != digest]
    if changed:
        problems.append(f"the previous checkpoint's files changed or vanished: {changed}")
    leftovers = [n for n in names if n.startswith(".tmp-")]
    if leftovers:
        problems.append(f"temporary files left behind: {leftovers}")
    new_states = [n for n in names if n.endswith(".json") and n not in ctx.saved_checkpoint]
    if new_states:
        problems.append(f"a new checkpoint claims to be complete: {new_states}")
    return problems


def worker_late_for_a_failed_job(ctx: Context) -> JobSpec:
    # algo-3's sshd cannot start (an empty /etc/ssh: no sshd_config), which fails the job before algo-2, 6 s late,
    # checks in: algo-2 must end with the master's reason within seconds, not at its peer timeout (60 s).
    empty = ctx.workdir / "empty-etc-ssh"
    empty.mkdir(exist_ok=True)
    spec = allreduce_job(ctx, start_delays={"algo-2": 6}, host_mounts={"algo-3": [(empty, "/etc/ssh", "ro")]})
    return dataclasses.replace(spec, hosts=3)


class Stranger:
    """Another container on the job's network checks in with the master as `claim` (a host name, launcher
    version, and whether it goes on to send `ready`), while the master waits for its workers (algo-2 starts 5 s
    late) or, with during_job, once training is under way. Judged: the job succeeds on every host, the master's
    log names the stranger's address and claim, and the stranger learned nothing about the job."""

    def __init__(self, host: str, version: str = LAUNCHER_VERSION, ready: bool = False, during_job: bool = False):
        self.host, self.version, self.ready, self.during_job = host, version, ready, during_job
        self.output = ""

    def build(self, ctx: Context) -> JobSpec:
        argv = ["python", "/stranger/stranger.py", "algo-1", "7420", self.host, self.version,
                *(["--ready"] if self.ready else [])]

        def inject(job: RunningJob) -> None:
            if self.during_job:
                job.wait_for_log("algo-1", "rank 0/2", timeout=120)
            done = job.stranger(ctx.image, argv, mounts=[(FAULT_CODE_DIR, "/stranger")])
            self.output = done.stdout + done.stderr

        if self.during_job:
            return allreduce_job(ctx, hps={"extra-steps": "100"}, during=inject)
        return allreduce_job(ctx, during=inject, start_delays={"algo-2": 5})

    def check(self, ctx: Context, result) -> list:
        address = re.search(r"stranger-address (\S+)", self.output)
        if not address:
            return [f"the stranger did not get to check in: {self.output[-300:]!r}"]
        problems = []
        logged = f"ignored a check-in from {address.group(1)} (as {self.host!r}, launcher {self.version})"
        if logged not in result.master.logs:
            problems.append(f"the master's log does not say {logged!r}")
        answer = f'stranger-answer {{"type": "reject", "message": "{address.group(1)} is not a worker of this job"}}'
        if answer not in self.output:
            problems.append(f"the stranger was answered otherwise: {self.output[-300:]!r}")
        return problems


def stranger_scenario(name: str, stranger: Stranger) -> Scenario:
    return Scenario(name, "success on every host; the master logs the stranger's address and claim, tells it "
                          "nothing", stranger.build, exits=(0, 0), max_seconds=120, check=stranger.check,
                    toolkit=False)  # this launcher's handshake


# Parameter-server jobs (sagemaker_parameter_server_enabled=true): the user's dist_sync script, each host's own
# scheduler, servers and workers, no mpirun. ps-lite leaves every other process waiting forever when one ends.

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
    Scenario("parameter server: the scheduler never starts", "both fail naming the scheduler: its port (_ps_port) "
             "is the handshake's", lambda ctx: ps_job(ctx, hps={"_ps_port": "7420"}), exits=(NONZERO, NONZERO),
             toolkit=False, max_seconds=45, failure=r"^scheduler on algo-1 .*before the workers were done"),
    Scenario("parameter server: a server stops answering", "both fail within 45 s of the stop (a 10 s progress "
             "timeout), naming a waiting worker", server_stopped("script"),
             exits=(NONZERO, NONZERO), fault="injected", toolkit=False, max_seconds=45,
             failure=WORKER_WAITED_ON_SERVERS + r"\(wait_to_read\) called from kvstore_sum\.py:\d+"),
    Scenario("parameter server: a server stops answering MNIST", "both fail within 45 s of the stop (a 10 s "
             "progress timeout), naming a waiting worker", server_stopped("mnist"),
             exits=(NONZERO, NONZERO), fault="injected", toolkit=False, max_seconds=45,
             failure=WORKER_WAITED_ON_SERVERS + r"\(\w+\) called from"),
    Scenario("parameter server: workers sum 20 s, 10 s progress timeout", "success: waiting on the servers' "
             "answers, briefly, is not a hang",
             lambda ctx: ps_job(ctx, hps={"extra-steps": "150", "log-steps": "true", "wide-key": "true",
                                          "mpi_progress_timeout_s": "10"}),
             exits=(0, 0), toolkit=False, max_seconds=120),
    Scenario("parameter server: a host's container killed", "the master stops the job, names algo-2",
             lambda ctx: ps_job(ctx, hps={"extra-steps": "600"}, during=kill_when_ps_training("algo-2")),
             exits=(1, KILLED), fault="injected", toolkit=False,
             failure=r"^host algo-2 went away during the job"),
    Scenario("parameter server: SIGTERM to every host", "as StopTrainingJob: the workers checkpoint, both exit 143",
             sigterm_during_ps_mnist, exits=(143, 143), fault="injected", max_seconds=120, toolkit=False,
             failure=r"^stopped by SIGTERM", check=checkpoint_saved_on_stop),
]


SCENARIOS = [
    Scenario("worker container never starts", "master fails naming algo-2 within the peer timeout (10 s)",
             lambda ctx: allreduce_job(ctx, hps={"mpi_peer_timeout_s": "10"}, skip_hosts=("algo-2",)),
             exits=(1, None), failure=r"^cluster setup failed on master algo-1: worker\(s\) algo-2 did not check in",
             max_seconds=30),
    Scenario("worker killed mid-training", "master stops the job, names algo-2",
             container_fault("algo-2"), exits=(NONZERO, KILLED), fault="injected",
             # The master's own watch (its link to the worker closed), or mpirun's loss of its daemon there.
             failure=r"^(worker algo-2 went away during the job \(container stopped or crashed\)|lost contact with "
                     r"host algo-2: its MPI daemon died)"),
    Scenario("master killed mid-training", "worker exits non-zero: lost the master",
             container_fault("algo-1"), exits=(KILLED, NONZERO), fault="injected",
             worker_failure=r"^worker algo-2: lost contact with the master algo-1"),
    Scenario("one rank raises", "both fail; failure names rank 1 on algo-2 and the exception",
             rank_fault("raise"), exits=(1, 1), fault="rank",
             failure=r"^rank 1 on algo-2 (exited with code 1|failed): ValueError: rank 1 was asked to fail",
             worker_failure=r"^worker algo-2: the job failed on algo-1: rank 1 on algo-2"),
    Scenario("one rank exits 0 early", "both fail: a rank left while the others still needed it",
             rank_fault("exit0"), exits=(NONZERO, NONZERO), fault="rank",
             failure=r"^rank 0 on algo-1 exited with code 1: .*Horovod has been shut down"),
    Scenario("one rank segfaults", "both fail; failure names rank 1 and SIGSEGV",
             rank_fault("segv"), exits=(NONZERO, NONZERO), fault="rank",
             failure=r"^rank 1 on algo-2 .*(SIGSEGV|signal 11|[Ss]egmentation)"),
    Scenario("one rank crashes in native code", "both fail; failure names rank 1 on algo-2 and SIGSEGV, then how it "
             "ended", native_crash("mxnet"), exits=(NONZERO, NONZERO), fault="rank",
             # MXNet's handler exits (255); that exit aborts when the crash was on an engine thread (SIGABRT).
             failure=r"^rank 1 on algo-2 crashed with SIGSEGV \(segmentation fault\)(?: in \S+ \(\S+\))?; then it "
                     r"(?:exited with code 255|was killed by SIGABRT)$",
             worker_failure=r"^worker algo-2: the job failed on algo-1: rank 1 on algo-2 crashed with SIGSEGV"),
    Scenario("one rank crashes in native code, Open MPI reports it", "both fail; failure names rank 1 on algo-2, "
             "SIGSEGV and the frame", native_crash("open-mpi"), exits=(NONZERO, NONZERO), fault="rank",
             # ctypes called libffi's ffi_call, the innermost frame with a symbol outside libc and Python
             failure=r"^rank 1 on algo-2 was killed by SIGSEGV \(segmentation fault\) in ffi_call \(libffi\.so\.\d+\)$"),
    Scenario("a crashed rank hangs while exiting", "both fail within the crash grace (30 s), naming rank 1 on "
             "algo-2 and SIGSEGV", native_crash("mxnet-exit-hangs"), exits=(NONZERO, NONZERO), fault="rank",
             max_seconds=60,
             failure=r"^rank 1 on algo-2 crashed with SIGSEGV \(segmentation fault\) and the job had not ended 30 s "
                     r"later"),
    Scenario("rank SIGKILLed, not out of memory", "both fail; failure names rank 1 and SIGKILL, no out of memory",
             rank_fault("sigkill"), exits=(NONZERO, NONZERO), fault="rank",
             failure=r"^rank 1 on algo-2 .*(SIGKILL|signal 9)"),
    Scenario("rank out of memory", "both fail; failure says algo-2 ran out of memory, its limit and peak",
             rank_out_of_memory, exits=(NONZERO, NONZERO), fault="rank",
             failure=r"^algo-2 ran out of memory: the kernel's OOM killer killed rank 1 \(SIGKILL\); container limit "
                     r"768 MiB, peak usage [\d.]+ MiB of 768 MiB",
             worker_failure=r"^worker algo-2: the job failed on algo-1: algo-2 ran out of memory"),
    Scenario("rank dies of a full /dev/shm", "both fail; failure names /dev/shm, its size, the need and the fixes; "
             "the start log warned", rank_fills_dev_shm, exits=(NONZERO, NONZERO), fault="rank",
             failure=r"^/dev/shm too small: rank 1 on algo-2 died of Bus error: SIGBUS on a page of a full /dev/shm "
                     r"\(.*\); /dev/shm there is 16 MiB, smaller than the about 128 MiB .* Fix: a larger /dev/shm: "
                     r"docker run --shm-size=1g",
             worker_failure=r"^worker algo-2: the job failed on algo-1: /dev/shm too small: rank 1 on algo-2",
             check=start_warning_said("WARNING: /dev/shm is 16 MiB, less than the about 128 MiB (1 rank x 2 "
                                      "data-loader workers (num_workers) x 64 MiB) this job needs")),
    Scenario("SIGTERM to the master", "job stops, checkpoint saved, both exit 143",
             sigterm_during_mnist(("algo-1",)), exits=(143, 143), fault="injected", max_seconds=120,
             failure=r"^stopped by SIGTERM", check=checkpoint_saved_on_stop),
    Scenario("SIGTERM to every host", "as StopTrainingJob: checkpoint saved, both exit 143",
             sigterm_during_mnist(("algo-1", "algo-2")), exits=(143, 143), fault="injected", max_seconds=120,
             failure=r"^stopped by SIGTERM", check=checkpoint_saved_on_stop),
    Scenario("worker's hostname resolves late", "success: algo-2 resolves 6 s late, within the peer timeout",
             worker_name_late, exits=(0, 0), max_seconds=90),
    Scenario("master starts late", "success: the worker waits for algo-1 to resolve and listen",
             master_starts_late, exits=(0, 0), max_seconds=90),
    Scenario("hostname never resolves", "both fail within the peer timeout (10 s), naming algo-2",
             never_resolves, exits=(1, 1),
             failure=r"^cluster setup failed on master algo-1: worker algo-2 checked in, but the master cannot "
                     r"resolve its name",
             # algo-2 never got the job's key: the master cannot check who a claim with an unresolvable name is.
             worker_failure=r"^worker algo-2: the master algo-1 rejected this worker: algo-2 does not resolve on the "
                            r"master within the peer timeout", max_seconds=30,
             # The toolkit runs with hostnames equal to the names (its sshd setup needs them), and its mpirun
             # reached algo-2 anyway: not the same fault.
             toolkit=False),
    Scenario("MPI daemon dies silently on a worker", "master stops mpirun within the peer timeout (15 s)",
             daemon_fails_on_worker, exits=(NONZERO, NONZERO), max_seconds=45,
             # Whether the worker saw the daemon before it died decides which watch ends the job.
             failure=r"^mpirun(?: started no MPI daemon on algo-2 within 15 s|'s daemon on algo-2 exited and mpirun "
                     r"was still waiting for it 15 s later)",
             toolkit=False),  # it needs this launcher's handshake (the workers' "launched" report)
    Scenario("malformed hyperparameters.json", "both exit 2 naming the file",
             config_file("hyperparameters.json", '{"sagemaker_program": "allreduce.py",'), exits=(2, 2),
             failure=r"^invalid job configuration: /opt/ml/input/config/hyperparameters.json is not valid JSON",
             max_seconds=20),
    Scenario("wrong type for a launcher setting", "both exit 2 naming key and value",
             lambda ctx: allreduce_job(ctx, hps={"sagemaker_mpi_enabled": "maybe"}), exits=(2, 2),
             failure=r"^invalid job configuration: hyperparameter sagemaker_mpi_enabled='maybe' is not a boolean",
             max_seconds=20),
    Scenario("wrong type for a program argument", "both fail naming --epochs",
             lambda ctx: mnist_job(ctx, hps={"epochs": "ten"}), exits=(2, 2),
             failure=MNIST_ERROR + r"argument --epochs: invalid integer value: 'ten'", max_seconds=45),
    Scenario("unknown program", "both exit 2 naming the program",
             lambda ctx: allreduce_job(ctx, hps={"sagemaker_program": "resnet", "sagemaker_submit_directory": ""}),
             exits=(2, 2), failure=r"^invalid job configuration: unknown program 'resnet'", max_seconds=20),
    Scenario("missing channel", "both fail naming the train channel",
             lambda ctx: mnist_job(ctx, channels=[Channel("test", ctx.mnist / "test")]), exits=(2, 2),
             failure=MNIST_ERROR + r"missing channel 'train': directory /opt/ml/input/data/train does not exist",
             max_seconds=45),
    Scenario("corrupt data file", "both fail naming the file",
             corrupt_train_channel, exits=(2, 2), max_seconds=45,
             failure=MNIST_ERROR + r"IDX file /opt/ml/input/data/train/\S*images\S* is truncated or padded"),
    Scenario("disk full while saving a checkpoint", "both fail naming the full disk and file; the previous checkpoint intact",
             disk_full_job, exits=(NONZERO, NONZERO), max_seconds=120,
             failure=r"^rank 0 on algo-1 exited with code 1: .*No space left on device while saving /opt/ml/checkpoints/",
             check=previous_checkpoint_survives),
    Scenario("Pipe mode with too few channels", "both exit 2 before training",
             lambda ctx: mnist_job(ctx, channels=[Channel("train_0", ctx.shards / "train_0", "Pipe"),
                                                  Channel("test", ctx.mnist / "test")]),
             exits=(2, 2), max_seconds=45,
             failure=MNIST_ERROR + r"Pipe mode needs one channel per rank: have train_0\.\.train_0, need 2"),
    Scenario("collective stalls: two ranks read one Pipe FIFO",
             "both fail within the stall timeout (10 s) + 2 checks, naming ranks 1, 3, the tensor and the Pipe fix",
             pipe_readers_stall, exits=(NONZERO, NONZERO), fault="rank", max_seconds=45,
             failure=r"^Horovod stall: ranks 1 on algo-1, 3 on algo-2 never submitted horovod_allreduce\.step0, "
                     r"which the other ranks waited on .*Pipe mode.*own channel",
             worker_failure=r"^worker algo-2: the job failed on algo-1: Horovod stall: ranks 1 on algo-1, 3 on algo-2",
             check=stacks_written(("algo-1", "algo-2-rank-3.txt", "in read_pipe_channel"),
                                  ("algo-1", "algo-1-rank-1.txt", "in read_pipe_channel"))),
    Scenario("rank stuck outside any collective", "both fail within the progress timeout (10 s), naming rank 1, "
             "where it blocked and its last line",
             rank_hangs_outside_collectives, exits=(NONZERO, NONZERO), fault="rank", max_seconds=30,
             failure=r"^no progress: rank 1 on algo-2 wrote no output, started no collective and did not compute for 10 s "
                     r"\(mpi_progress_timeout_s\); blocked in allreduce\.py:\d+ .*'rank 1: reading the next batch'",
             check=stacks_written(("algo-1", "algo-2-rank-1.txt", "os.read(never_written, 1)"),
                                  ("algo-1", "algo-1-rank-0.txt", "Thread MainThread"),
                                  ("algo-2", "algo-2-rank-1.txt", "os.read(never_written, 1)"))),
    Scenario("one rank works alone, within the timeouts", "success: rank 1 waits 16 s in a collective, silent, "
             "with a 6 s progress and 40 s stall timeout",
             solo_work_within_timeouts, exits=(0, 0), max_seconds=120),
    Scenario("network partition mid-allreduce", "both fail within 60 s, each naming the host it lost",
             partition_mid_allreduce, exits=(NONZERO, NONZERO), fault="injected", max_seconds=60,
             failure=r"^worker algo-2 became unreachable during the job",
             worker_failure=r"^worker algo-2: lost contact with the master algo-1",
             # Each side writes its own ranks' stacks: the other is out of reach.
             check=stacks_written(("algo-1", "algo-1-rank-0.txt", "Thread MainThread"),
                                  ("algo-2", "algo-2-rank-1.txt", "Thread MainThread"))),
    stranger_scenario("a stranger checks in as a host of no job", Stranger("algo-7")),
    stranger_scenario("a stranger checks in as algo-2 before algo-2 does", Stranger("algo-2", ready=True)),
    stranger_scenario("a stranger checks in with another launcher version", Stranger("algo-2", version="0.0.1")),
    stranger_scenario("a forged check-in during the job", Stranger("algo-2", during_job=True)),
    Scenario("a worker checks in after the job failed", "the late worker ends within seconds with the master's reason",
             worker_late_for_a_failed_job, exits=(1, 1, 1), max_seconds=30, toolkit=False,
             failure=r"^cluster setup failed on master algo-1: worker algo-3: sshd on algo-3 did not start",
             worker_failure=r"^worker algo-2: the master algo-1 rejected this worker: the job ended before algo-2 "
                            r"checked in: cluster setup failed on master algo-1: worker algo-3: sshd on algo-3"),
    *PS_SCENARIOS,
]


# ---------------------------------------------------------------------------------------------------------
# Running and judging.


def first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def fault_time(scenario: Scenario, result) -> float | None:
    if scenario.fault == "injected":
        return result.fault_at
    if scenario.fault == "rank":
        marks = [float(p.read_text()) for h in result.hosts for p in (h.root / "output" / "data").glob("fault-at")]
        return min(marks) if marks else None
    starts = [h.started_at for h in result.hosts if h.started_at]
    return min(starts) if starts else None


def judge(scenario: Scenario, ctx: Context, result) -> Observation:
    problems = []
    if result.during_error:
        problems.append(f"fault injection failed: {result.during_error}")
    for host, expected in zip(result.hosts, scenario.exits, strict=True):
        code = host.exit_code
        if expected is None:
            continue  # the host never ran
        if code is None:
            problems.append(f"{host.name} still running after {JOB_TIMEOUT_S:.0f} s")
        elif expected == NONZERO and code == 0:
            problems.append(f"{host.name} exited 0 (expected non-zero)")
        elif expected == KILLED and code != 137:
            problems.append(f"{host.name} exited {code} (expected 137, killed)")
        elif isinstance(expected, int) and code != expected:
            problems.append(f"{host.name} exited {code} (expected {expected})")
    master_line = first_line(result.master.failure)
    if scenario.failure and not re.search(scenario.failure, master_line):
        problems.append(f"master failure line {master_line!r} does not match {scenario.failure!r}")
    if scenario.worker_failure:
        worker_line = first_line(result.hosts[1].failure)
        if not re.search(scenario.worker_failure, worker_line):
            problems.append(f"worker failure line {worker_line!r} does not match {scenario.worker_failure!r}")
    if scenario.exits == (0, 0) and any(h.failure for h in result.hosts):
        problems.append("a failure file was written by a successful job")
    started = fault_time(scenario, result)
    ends = [h.finished_at for h in result.hosts if h.finished_at]
    seconds = None
    if started is None:
        problems.append("the fault's time is unknown (the fault never happened?)")
    elif ends and all(h.exit_code is not None for h, e in zip(result.hosts, scenario.exits, strict=True)
                      if e is not None):
        seconds = max(ends) - started
        if seconds > scenario.max_seconds:
            problems.append(f"{seconds:.1f} s from fault to exit (limit {scenario.max_seconds:.0f} s)")
    if scenario.check:
        problems += scenario.check(ctx, result)
    # The master's cause; when the master itself was the casualty, the worker's.
    shown = master_line or (f"algo-2: {first_line(result.hosts[1].failure)}" if result.hosts[1].failure else "")
    return Observation(scenario.name, ctx.launcher, scenario.expected, result.exit_codes, shown, seconds, problems)


def run_scenario(scenario: Scenario, ctx: Context, ssh_dir: Path | None = None) -> tuple[Observation, object]:
    spec = scenario.build(ctx)
    if ctx.launcher == "toolkit":
        spec = as_toolkit_job(spec, ssh_dir)
    result = run_job(spec, ctx.workdir / "job")
    return judge(scenario, ctx, result), result


def make_mnist_data(image: str, root: Path) -> tuple[Path, Path]:
    """Small synthetic MNIST from the image's own data tool, and 2 per-rank RecordIO shards."""
    script = ("synth-data mnist /data/mnist --train 2000 --test 500 && "
              "synth-data shard /data/mnist/train /data/shards --shards 2 --format recordio")
    subprocess.run([DOCKER, "run", "--rm", "-v", f"{root}:/data", "--entrypoint", "sh", image, "-c", script],
                   check=True, capture_output=True)
    return root / "mnist", root / "shards"


def format_report(observations: list, title: str) -> str:
    rows = [("scenario", "expected", "observed", "s to exit", "result")]
    for o in observations:
        observed = o.observed if len(o.observed) <= 90 else o.observed[:87] + "..."
        rows.append((o.scenario, o.expected, observed, "-" if o.seconds is None else f"{o.seconds:.1f}", o.result))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [title]
    for i, row in enumerate(rows):
        lines.append("| " + " | ".join(cell.ljust(widths[j]) for j, cell in enumerate(row)) + " |")
        if i == 0:
            lines.append("| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)


"""How each fault of the suite is caused (scenarios.py): the jobs (a user's Horovod script, allreduce.py, or the
built-in MNIST) with what they are told to do wrong, the injectors that kill, stop or cut off a container at a
chosen moment, and the checks beyond exit codes and failure lines. A parameter-server job's: ps_faults.py."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

from fault_harness import CODE_DIR, FAULT_CODE_DIR, JOB_TIMEOUT_S, Context, Scenario
from local_job import Channel, JobSpec, RunningJob, run_job
from sagemaker_mxnet_horovod import __version__ as LAUNCHER_VERSION

# The first line of the failure file when the MNIST program rejects its input on a rank (exit 2, before training).
MNIST_ERROR = r"^rank [01] on algo-[12] exited with code 2: mnist: error: "


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


def master_said(pattern: str):
    """A check: the master's log has a line matching pattern."""
    def check(ctx: Context, result) -> list:
        return [] if re.search(pattern, result.master.logs) else [f"the master's log has no line matching {pattern!r}"]

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
    # After 20 steps (2 s and more: the watch, which looks every second, has wrapped Horovod's calls), rank 1 blocks
    # reading a pipe nobody writes; rank 0 waits in its next allreduce. The stall timeout is left at its default (an
    # hour): the progress watch is what ends it.
    return allreduce_job(ctx, hps={"fail-rank": "1", "fail-mode": "hang", "steps-before-fault": "20",
                                   "extra-steps": "600", "mpi_progress_timeout_s": "10"})


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


"""Fault scenarios across real containers, as data: how to cause the fault, what every host must do.

Each scenario builds a local_job.JobSpec (fault_jobs.py: optionally with a `during` injector that kills or signals
a container at a chosen moment) and states the expected exit code of every host, the first line of the master's
(and, where it matters, the worker's) /opt/ml/output/failure, and how many seconds may pass from the fault to the
last container's exit. fault_harness.py runs one under this image's launcher or under the sagemaker-training
toolkit's MPI runner (same image) and judges it; ps_faults.py holds the parameter server's, requirements_faults.py
a user's requirements.txt's.
"""

from __future__ import annotations

from fault_harness import KILLED, NONZERO, Scenario
from fault_jobs import (
    MNIST_ERROR,
    Stranger,
    allreduce_job,
    checkpoint_saved_on_stop,
    config_file,
    container_fault,
    corrupt_train_channel,
    daemon_fails_on_worker,
    disk_full_job,
    master_starts_late,
    mnist_job,
    native_crash,
    never_resolves,
    partition_mid_allreduce,
    pipe_readers_stall,
    previous_checkpoint_survives,
    rank_fault,
    rank_fills_dev_shm,
    rank_hangs_outside_collectives,
    rank_out_of_memory,
    sigterm_during_mnist,
    solo_work_within_timeouts,
    stacks_written,
    start_warning_said,
    stranger_scenario,
    worker_late_for_a_failed_job,
    worker_name_late,
)
from local_job import Channel
from ps_faults import PS_SCENARIOS
from requirements_faults import REQUIREMENTS_SCENARIOS

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
             pipe_readers_stall, exits=(NONZERO, NONZERO), fault="rank", max_seconds=45, alone=True,
             failure=r"^Horovod stall: ranks 1 on algo-1, 3 on algo-2 never submitted horovod_allreduce\.step0, "
                     r"which the other ranks waited on .*Pipe mode.*own channel",
             worker_failure=r"^worker algo-2: the job failed on algo-1: Horovod stall: ranks 1 on algo-1, 3 on algo-2",
             check=stacks_written(("algo-1", "algo-2-rank-3.txt", "in read_pipe_channel"),
                                  ("algo-1", "algo-1-rank-1.txt", "in read_pipe_channel"))),
    Scenario("rank stuck outside any collective", "both fail within the progress timeout (10 s), naming rank 1, "
             "where it blocked, its last line and its last Horovod call",
             rank_hangs_outside_collectives, exits=(NONZERO, NONZERO), fault="rank", max_seconds=30, alone=True,
             failure=r"^no progress: rank 1 on algo-2 wrote no output, started no collective and did not compute for 10 s "
                     r"\(mpi_progress_timeout_s\); blocked in allreduce\.py:\d+ .*'rank 1: reading the next batch'; "
                     r"last Horovod call: allreduce$",
             check=stacks_written(("algo-1", "algo-2-rank-1.txt", "os.read(never_written, 1)"),
                                  ("algo-1", "algo-1-rank-0.txt", "Thread MainThread"),
                                  ("algo-2", "algo-2-rank-1.txt", "os.read(never_written, 1)"))),
    Scenario("one rank works alone, within the timeouts", "success: rank 1 waits 16 s in a collective, silent, "
             "with a 6 s progress and 40 s stall timeout",
             solo_work_within_timeouts, exits=(0, 0), max_seconds=120, alone=True),
    Scenario("network partition mid-allreduce", "both fail within 60 s, each naming the host it lost",
             partition_mid_allreduce, exits=(NONZERO, NONZERO), fault="injected", max_seconds=60, alone=True,
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
    *REQUIREMENTS_SCENARIOS,
]

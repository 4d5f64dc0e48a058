"""shm.py: the job's /dev/shm need (ranks, data-loader workers, GPUs), the start warning with its fixes, the
symptoms a rank (or a parameter-server process) dies with and the cause named for them (only where /dev/shm is
small)."""

import signal

import pytest
from sagemaker_mxnet_horovod.core.plan import ShmBudget
from sagemaker_mxnet_horovod.diagnose.shm import (
    GIB,
    MIB,
    Symptom,
    cause,
    estimate,
    find_symptom,
    loader_workers,
    process_cause,
    process_symptom,
    start_warning,
    suggested_size,
)

DOCKER_DEFAULT = 64 * MIB


def test_the_need_counts_ranks_loader_workers_and_gpus():
    assert estimate(DOCKER_DEFAULT, 1, 0, None, 0).need_bytes == 0  # one rank, no workers: nothing to share
    assert estimate(DOCKER_DEFAULT, 2, 0, None, 0).need_bytes == 8 * MIB
    rcnn = estimate(DOCKER_DEFAULT, 1, 4, "num-workers", 0)
    assert (rcnn.need_bytes, rcnn.short) == (256 * MIB, True)
    gpus = estimate(DOCKER_DEFAULT, 8, 4, "num-workers", 8)
    assert gpus.need_bytes == 8 * 4 * MIB + 8 * 4 * 64 * MIB + 8 * 128 * MIB
    assert gpus.parts == ("8 ranks x 4 MiB for Open MPI", "8 ranks x 4 data-loader workers (num-workers) x 64 MiB",
                          "8 GPUs x 128 MiB for NCCL")
    assert not estimate(None, 8, 4, "num-workers", 8).short  # no /dev/shm at all: nothing to compare


def test_parameter_server_workers_need_no_open_mpi_segment():
    # ps-lite's workers, servers and scheduler talk over sockets: only their data-loader workers use /dev/shm.
    assert estimate(DOCKER_DEFAULT, 2, 0, None, 0, mpi=False).need_bytes == 0
    workers = estimate(DOCKER_DEFAULT, 2, 2, "num_workers", 0, mpi=False)
    assert (workers.need_bytes, workers.parts) == (256 * MIB, ("2 ranks x 2 data-loader workers (num_workers) x "
                                                               "64 MiB",))


def test_loader_workers_from_the_declared_argument_or_a_users_conventional_key():
    assert loader_workers({}, ("num-workers", 4)) == (4, "num-workers")  # the built-in program's default
    assert loader_workers({"num-workers": "0"}, ("num-workers", 4)) == (0, "num-workers")
    assert loader_workers({"num_workers": "6"}, None) == (6, "num_workers")
    assert loader_workers({"epochs": "3"}, None) == (0, None)
    assert loader_workers({"num_workers": "many"}, None) == (0, "num_workers")  # the program rejects it itself


def test_the_start_warning_names_size_need_symptoms_and_fixes():
    warning = start_warning(estimate(DOCKER_DEFAULT, 2, 4, "num-workers", 2))
    assert warning == (
        "WARNING: /dev/shm is 64 MiB, less than the about 776 MiB (2 ranks x 4 MiB for Open MPI, 2 ranks x 4 "
        "data-loader workers (num-workers) x 64 MiB, 2 GPUs x 128 MiB for NCCL) this job needs: ranks can die with "
        "'Bus error', 'received 0 items of ancdata' or NCCL's 'unhandled system error'. Fix: a larger /dev/shm: "
        "docker run --shm-size=1g (SDK v2 local mode: shm_size: 1g under local: container_config: in "
        "~/.sagemaker/config.yaml); fewer data-loader workers (num-workers); NCCL_SHM_DISABLE=1 in the job's "
        "environment (NCCL between GPUs without /dev/shm)")
    assert start_warning(estimate(GIB, 2, 4, "num-workers", 2)) is None
    assert suggested_size(estimate(DOCKER_DEFAULT, 8, 8, "num_workers", 8)) == "6g"
    cpu_only = start_warning(estimate(DOCKER_DEFAULT, 1, 2, "num_workers", 0))
    assert "NCCL_SHM_DISABLE" not in cpu_only and "fewer data-loader workers (num_workers)" in cpu_only


@pytest.mark.parametrize("stderr, mpirun, expected", [
    ({1: ["loading", "Bus error (core dumped)"]}, [], Symptom(1, "Bus error (core dumped)",
                                                            "Bus error: SIGBUS on a page of a full /dev/shm")),
    ({0: ["RuntimeError: received 0 items of ancdata"]}, [], Symptom(
        0, "RuntimeError: received 0 items of ancdata",
        "received 0 items of ancdata: a DataLoader worker could not pass a batch through /dev/shm")),
    ({2: ["horovod.common.exceptions.HorovodInternalError: ncclCommInitRank failed: unhandled system error"]}, [],
     Symptom(2, "horovod.common.exceptions.HorovodInternalError: ncclCommInitRank failed: unhandled system error",
             "NCCL's unhandled system error: its shared-memory transport failed")),
    ({}, ["mpirun noticed that process rank 1 with PID 0 on node algo-2 exited on signal 7 (Bus error)."],
     Symptom(None, "mpirun noticed that process rank 1 with PID 0 on node algo-2 exited on signal 7 (Bus error).",
             "Bus error: SIGBUS on a page of a full /dev/shm")),
    ({0: ["ValueError: bad label"]}, ["exited on signal 9 (Killed)."], None),
])
def test_symptoms_in_a_ranks_stderr_or_mpiruns_report(stderr, mpirun, expected):
    assert find_symptom(stderr, mpirun) == expected


def test_the_cause_is_named_only_where_dev_shm_is_small():
    budget = estimate(DOCKER_DEFAULT, 1, 4, "num-workers", 0)
    bus = Symptom(1, "Bus error", "Bus error: SIGBUS on a page of a full /dev/shm")
    assert cause(bus, "rank 1 on algo-2", budget, DOCKER_DEFAULT) == (
        "/dev/shm too small: rank 1 on algo-2 died of Bus error: SIGBUS on a page of a full /dev/shm ('Bus error'); "
        "/dev/shm there is 64 MiB, smaller than the about 256 MiB (1 rank x 4 data-loader workers (num-workers) x "
        "64 MiB) this job needs by the launcher's estimate. Fix: a larger /dev/shm: docker run --shm-size=1g (SDK v2 "
        "local mode: shm_size: 1g under local: container_config: in ~/.sagemaker/config.yaml); fewer data-loader "
        "workers (num-workers)")
    # Enough by the estimate but small: batches larger than assumed.
    assert "above the launcher's estimate" in cause(bus, "rank 1 on algo-2", budget, 512 * MIB)
    assert cause(bus, "rank 1 on algo-2", budget, 30 * GIB) is None  # a SageMaker host's: another cause
    assert cause(bus, "rank 1 on algo-2", ShmBudget(None, 0, ()), None) is None


def test_what_is_free_of_a_partly_filled_dev_shm_counts_not_its_size():
    # A host's /dev/shm shared with others (docker run --ipc=host): 2 GiB, 100 MiB of it free.
    budget = estimate(2 * GIB, 1, 4, "num-workers", 0, free_bytes=100 * MIB)
    assert budget.short and budget.available_bytes == 100 * MIB
    assert start_warning(budget).startswith("WARNING: /dev/shm is 100 MiB free of 2 GiB, less than the about 256 MiB "
                                            "(1 rank x 4 data-loader workers (num-workers) x 64 MiB) this job needs")
    assert start_warning(estimate(2 * GIB, 1, 4, "num-workers", 0, free_bytes=2 * GIB)) is None
    bus = Symptom(1, "Bus error", BUS)
    assert "; /dev/shm there is 100 MiB free of 2 GiB, smaller than the about 256 MiB" in cause(
        bus, "rank 1 on algo-2", budget, 2 * GIB, 100 * MIB)
    # Ample in size is not enough: a SageMaker-sized /dev/shm that others filled is still blamed.
    assert "above the launcher's estimate" in cause(bus, "rank 1 on algo-2", budget, 30 * GIB, 512 * MIB)
    assert cause(bus, "rank 1 on algo-2", budget, 30 * GIB, 29 * GIB) is None
    assert process_cause("worker 0 on algo-1", (), -signal.SIGBUS, budget).startswith(
        f"/dev/shm too small: worker 0 on algo-1 died of {BUS} ('killed by SIGBUS'); /dev/shm there is 100 MiB free "
        "of 2 GiB, smaller than")


BUS = "Bus error: SIGBUS on a page of a full /dev/shm"
ANCDATA = "received 0 items of ancdata: a DataLoader worker could not pass a batch through /dev/shm"
NCCL = "NCCL's unhandled system error: its shared-memory transport failed"
ANCDATA_LINE = "RuntimeError: received 0 items of ancdata"


@pytest.mark.parametrize("tail, returncode, expected", [
    # Killed by SIGBUS with the launcher as its parent: no line says so, the signal is the symptom.
    ((), -signal.SIGBUS, Symptom(None, "killed by SIGBUS", BUS)),
    (("Traceback (most recent call last):", "  File \"train.py\", line 3"), -signal.SIGBUS,
     Symptom(None, "killed by SIGBUS", BUS)),
    # A line that says more wins over the bare signal.
    (("Fatal Python error: Bus error",), -signal.SIGBUS, Symptom(None, "Fatal Python error: Bus error", BUS)),
    ((ANCDATA_LINE,), -signal.SIGBUS, Symptom(None, ANCDATA_LINE, ANCDATA)),
    # A DataLoader's exception in the worker's own process: it exits 1.
    (("Traceback (most recent call last):", "  ...", ANCDATA_LINE), 1, Symptom(None, ANCDATA_LINE, ANCDATA)),
    (("  ncclCommInitRank failed: unhandled system error  ",), 1,
     Symptom(None, "ncclCommInitRank failed: unhandled system error", NCCL)),
    # A wrapper shell reported its child's SIGBUS and exited as it did (128 + 7).
    (("bash: line 1:   42 Bus error (core dumped) python train.py",), 135,
     Symptom(None, "bash: line 1:   42 Bus error (core dumped) python train.py", BUS)),
    # The first symptom in the tail is the one named.
    ((ANCDATA_LINE, "Bus error"), 1, Symptom(None, ANCDATA_LINE, ANCDATA)),
    # Not /dev/shm's: other signals and errors, a process that did not fail.
    ((), -signal.SIGKILL, None),
    ((), -signal.SIGSEGV, None),
    (("ValueError: bad label",), 1, None),
    ((), 135, None),  # exit 135 without a line: a program's own choice of code, not a signal
    ((ANCDATA_LINE,), 0, None),  # it recovered (a retry) and exited 0: nothing to explain
])
def test_a_processs_symptom_is_a_line_of_its_tail_or_its_death_by_sigbus(tail, returncode, expected):
    assert process_symptom(tail, returncode) == expected


def test_a_processs_cause_names_it_where_dev_shm_is_small():
    budget = estimate(16 * MIB, 1, 2, "num_workers", 0, mpi=False)
    assert process_cause("worker 1 on algo-2", (), -signal.SIGBUS, budget) == (
        f"/dev/shm too small: worker 1 on algo-2 died of {BUS} ('killed by SIGBUS'); /dev/shm there is 16 MiB, "
        "smaller than the about 128 MiB (1 rank x 2 data-loader workers (num_workers) x 64 MiB) this job needs by the "
        "launcher's estimate. Fix: a larger /dev/shm: docker run --shm-size=1g (SDK v2 local mode: shm_size: 1g under "
        "local: container_config: in ~/.sagemaker/config.yaml); fewer data-loader workers (num_workers)")
    ancdata = process_cause("server 0 on algo-1", (ANCDATA_LINE,), 1, budget)
    assert ancdata.startswith(f"/dev/shm too small: server 0 on algo-1 died of {ANCDATA} ('{ANCDATA_LINE}')")
    # Docker's default with no loader workers counted: still small, so still named, as beyond the estimate.
    none_counted = estimate(DOCKER_DEFAULT, 1, 0, None, 0, mpi=False)
    assert "above the launcher's estimate" in process_cause("worker 0 on algo-1", (), -signal.SIGBUS, none_counted)


@pytest.mark.parametrize("tail, returncode, budget", [
    ((), -signal.SIGBUS, estimate(30 * GIB, 1, 2, "num_workers", 0, mpi=False)),  # a SageMaker host's
    ((), -signal.SIGBUS, None),  # no budget: nothing to compare with
    ((), -signal.SIGBUS, ShmBudget(None, 0, ())),  # no /dev/shm here
    (("ValueError: bad label",), 1, estimate(16 * MIB, 1, 2, "num_workers", 0, mpi=False)),  # no symptom
    ((), -signal.SIGKILL, estimate(16 * MIB, 1, 2, "num_workers", 0, mpi=False)),
])
def test_a_processs_cause_is_none_without_a_symptom_or_a_small_dev_shm(tail, returncode, budget):
    assert process_cause("worker 1 on algo-2", tail, returncode, budget) is None

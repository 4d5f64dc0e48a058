"""shm.py: the job's /dev/shm need (ranks, data-loader workers, GPUs), the start warning with its fixes, the
symptoms a rank dies with and the cause named for them (only where /dev/shm is small)."""

import pytest
from sagemaker_mxnet_horovod.diagnose.shm import (
    GIB,
    MIB,
    ShmBudget,
    Symptom,
    cause,
    estimate,
    find_symptom,
    loader_workers,
    start_warning,
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
    assert estimate(DOCKER_DEFAULT, 8, 8, "num_workers", 8).suggested_size() == "6g"
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

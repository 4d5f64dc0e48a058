"""/dev/shm: what a job needs there, the warning at the start when a host has less, and the cause named in the
failure file when a rank (or a parameter-server process) then dies of it. Pure, unit-tested.

Docker gives a container 64 MiB of /dev/shm unless told otherwise (`--shm-size`); SDK local mode and `docker
run` users meet that limit, SageMaker's own hosts have a large /dev/shm. What lives there:
- Open MPI's shared-memory transport (vader) between the ranks of one host: a segment per rank;
- MXNet DataLoader workers (`num_workers` > 0): each batch a worker loads travels to its rank in shared
  memory, and a loader keeps two batches per worker in flight;
- NCCL's shared-memory transport between the GPUs of one host (NVIDIA's containers are documented with
  --shm-size=1g).
When it is full, a process touching a page of a shared file dies by SIGBUS ("Bus error"), a DataLoader
cannot pass a batch's file descriptor ("received 0 items of ancdata"), NCCL fails with "unhandled system
error": far from the cause, which is what this module names.
"""

from __future__ import annotations

import math
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sagemaker_mxnet_horovod.core.plan import ShmBudget
from sagemaker_mxnet_horovod.diagnose.memory import size_text

MIB = 1 << 20
GIB = 1 << 30
# Estimates, per item, of what each needs in /dev/shm (see the module's docstring).
MPI_PER_RANK = 4 * MIB  # vader's segment: measured 4194312 B per rank (Open MPI 4.1, this image)
LOADER_PER_WORKER = 64 * MIB  # two batches in flight, e.g. 2 x 32 images of 3 x 224 x 224 float32 = 38 MiB
NCCL_PER_GPU = 128 * MIB  # NVIDIA's containers are documented with --shm-size=1g: spread over up to 8 GPUs
# A /dev/shm this large is never blamed: SageMaker's hosts have many GiB.
AMPLE = 1 * GIB
# Hyperparameters a user's script conventionally reads its DataLoader workers from.
LOADER_WORKER_KEYS = ("num_workers", "num-workers")
LOCAL_MODE_FIX = "SDK v2 local mode: shm_size: 1g under local: container_config: in ~/.sagemaker/config.yaml"

# Each symptom: a pattern in a rank's stderr (or mpirun's report) and what it means.
SYMPTOMS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"\bBus error\b|exited on signal 7\b"), "Bus error: SIGBUS on a page of a full /dev/shm"),
    (re.compile(r"received 0 items of ancdata"),
     "received 0 items of ancdata: a DataLoader worker could not pass a batch through /dev/shm"),
    (re.compile(r"unhandled system error"), "NCCL's unhandled system error: its shared-memory transport failed"),
)




def suggested_size(budget: ShmBudget) -> str:
    """A --shm-size that fits the need: whole GiB, at least 1."""
    return f"{max(1, math.ceil(budget.need_bytes / GIB))}g"


def fixes(budget: ShmBudget) -> str:
    size = suggested_size(budget)
    found = [f"a larger /dev/shm: docker run --shm-size={size} ({LOCAL_MODE_FIX.replace('1g', size)})"]
    if budget.loader_key:
        found.append(f"fewer data-loader workers ({budget.loader_key})")
    if budget.gpus > 1:
        found.append("NCCL_SHM_DISABLE=1 in the job's environment (NCCL between GPUs without /dev/shm)")
    return "; ".join(found)


def describe_need(budget: ShmBudget) -> str:
    return f"about {size_text(budget.need_bytes)} ({', '.join(budget.parts)})"


def loader_workers(program_args: Mapping[str, str], declared: tuple[str, int] | None) -> tuple[int, str | None]:
    """DataLoader workers per rank and the argument that says so: the program's declared argument (a built-in
    program's launch module: name and default), else a conventional hyperparameter of a user's script."""
    keys = (declared[0],) if declared else LOADER_WORKER_KEYS
    for key in keys:
        if key in program_args:
            try:
                return max(0, int(program_args[key])), key
            except ValueError:
                return 0, key  # the program rejects it itself
    return (declared[1], declared[0]) if declared else (0, None)


def estimate(size_bytes: int | None, ranks_per_host: int, workers_per_rank: int, loader_key: str | None,
             gpus: int, mpi: bool = True, free_bytes: int | None = None) -> ShmBudget:
    """The job's need on one host: Open MPI between its ranks (mpi: the ranks are MPI's; a parameter-server job's
    workers talk over ps-lite's sockets), each rank's loader workers, NCCL between GPUs. free_bytes: what is free
    of /dev/shm at the start, which the need is compared with."""
    need, parts = 0, []
    if mpi and ranks_per_host > 1:
        need += ranks_per_host * MPI_PER_RANK
        parts.append(f"{ranks_per_host} ranks x {size_text(MPI_PER_RANK)} for Open MPI")
    if workers_per_rank:
        need += ranks_per_host * workers_per_rank * LOADER_PER_WORKER
        ranks = f"{ranks_per_host} ranks" if ranks_per_host > 1 else "1 rank"
        parts.append(f"{ranks} x {workers_per_rank} data-loader workers ({loader_key}) x {size_text(LOADER_PER_WORKER)}")
    if gpus > 1:
        need += gpus * NCCL_PER_GPU
        parts.append(f"{gpus} GPUs x {size_text(NCCL_PER_GPU)} for NCCL")
    return ShmBudget(size_bytes, need, tuple(parts), loader_key if workers_per_rank else None, gpus, free_bytes)


def describe_space(size_bytes: int, free_bytes: int | None) -> str:
    """'64 MiB', or '24 MiB free of 64 MiB' where files fill part of it."""
    if free_bytes is None or free_bytes >= size_bytes:
        return size_text(size_bytes)
    return f"{size_text(free_bytes)} free of {size_text(size_bytes)}"


def start_warning(budget: ShmBudget) -> str | None:
    """The start log's warning when /dev/shm is smaller than the job's need."""
    if not budget.short:
        return None
    return (f"WARNING: /dev/shm is {describe_space(budget.size_bytes, budget.free_bytes)}, less than the "
            f"{describe_need(budget)} this job "
            "needs: ranks can die with 'Bus error', 'received 0 items of ancdata' or NCCL's 'unhandled system "
            f"error'. Fix: {fixes(budget)}")


@dataclass(frozen=True)
class Symptom:
    rank: int | None  # None: in mpirun's own report
    line: str
    meaning: str


def symptom_in(lines: Sequence[str], rank: int | None = None) -> Symptom | None:
    """The first shm symptom among these lines."""
    for line in lines:
        for pattern, meaning in SYMPTOMS:
            if pattern.search(line):
                return Symptom(rank, line.strip(), meaning)
    return None


def find_symptom(rank_stderr: Mapping[int, Sequence[str]], mpirun_tail: Sequence[str]) -> Symptom | None:
    """The first shm symptom in a rank's last stderr lines (lowest rank first), else in mpirun's report."""
    sources = [(rank, rank_stderr[rank]) for rank in sorted(rank_stderr)] + [(None, mpirun_tail)]
    return next(filter(None, (symptom_in(lines, rank) for rank, lines in sources)), None)


def process_symptom(tail: Sequence[str], returncode: int) -> Symptom | None:
    """The shm symptom of one process that failed (a parameter-server worker, server or scheduler): a symptom in
    its last stderr lines, else its death by SIGBUS itself. A shell prints 'Bus error' for a child killed so; the
    launcher is the parent here, and nothing prints it."""
    if returncode == 0:
        return None
    found = symptom_in(tail)
    if found is None and returncode == -signal.SIGBUS:
        found = Symptom(None, "killed by SIGBUS", SYMPTOMS[0][1])
    return found


def cause(symptom: Symptom, where: str, budget: ShmBudget, size_bytes: int | None,
          free_bytes: int | None = None) -> str | None:
    """The failure file's first line for a rank that died of a full /dev/shm, or None when that host's /dev/shm
    has ample room (the symptom has another cause). where: 'rank 1 on algo-2'; size_bytes, free_bytes: that host's
    /dev/shm's size and what is free of it (None: all of it)."""
    if size_bytes is None:
        return None
    available = size_bytes if free_bytes is None else free_bytes
    if available >= budget.need_bytes and available >= AMPLE:
        return None
    if available < budget.need_bytes:
        need = f"smaller than the {describe_need(budget)} this job needs by the launcher's estimate"
    else:
        need = (f"above the launcher's estimate of {describe_need(budget)}, but batches larger than it assumes "
                "need more")
    return (f"/dev/shm too small: {where} died of {symptom.meaning} ({symptom.line[:120]!r}); /dev/shm there is "
            f"{describe_space(size_bytes, free_bytes)}, {need}. Fix: {fixes(budget)}")


def process_cause(where: str, tail: Sequence[str], returncode: int, budget: ShmBudget | None) -> str | None:
    """cause() for one process that ended on this host (process_symptom), or None: no symptom, no budget, or an
    ample /dev/shm (the budget's size is this host's). where: 'worker 1 on algo-2'."""
    symptom = process_symptom(tail, returncode)
    if symptom is None or budget is None:
        return None
    return cause(symptom, where, budget, budget.size_bytes, budget.free_bytes)

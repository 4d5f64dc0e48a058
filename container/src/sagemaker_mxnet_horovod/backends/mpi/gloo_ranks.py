"""Each rank's own Horovod variables for Gloo under mpirun, as horovodrun --gloo gives them: HOROVOD_RANK, _SIZE,
_LOCAL_RANK, _LOCAL_SIZE, _CROSS_RANK, _CROSS_SIZE and _HOSTNAME, from Open MPI's own numbers for the rank.

One function serves both sides, so they cannot disagree: rank_env.py sets them inside each rank (from its
OMPI_COMM_WORLD_* variables), and the MPI master builds its Gloo rendezvous's table of ranks from the same function
(rendezvous.py). Horovod's rendezvous sizes each host's "local" scope by HOROVOD_HOSTNAME: any name
works as long as both sides use the same one, so the host is named by its number, not by a name the rank would
have to look up. Stdlib only: it runs in every rank before the program.
"""

from __future__ import annotations

from collections.abc import Mapping


def host_name(cross_rank: int) -> str:
    """HOROVOD_HOSTNAME of the ranks on the job's host number cross_rank."""
    return f"host-{cross_rank}"


def horovod_rank_variables(rank: int, size: int, local_rank: int, local_size: int) -> dict[str, str]:
    """Rank `rank` of `size`, `local_rank` of `local_size` on its host. The launcher's mpirun places ranks by slot
    with equal slots per host, so host h holds ranks h * local_size ... (h + 1) * local_size - 1; any other placement
    (a user's -map-by node) would give Gloo's rendezvous a table that is not the job's, and is refused."""
    if not (0 <= rank < size and 0 <= local_rank < local_size and size % local_size == 0
            and local_rank == rank % local_size):
        from sagemaker_mxnet_horovod.parse.settings import KEYS  # only here: 20 ms of imports in every rank

        raise ValueError(f"Gloo under mpirun needs ranks placed by slot, {local_size} per host: rank {rank} of "
                         f"{size} is local rank {local_rank} of {local_size} on its host (did "
                         f"{KEYS.custom_mpi_options} change -map-by?)")
    cross_rank = rank // local_size
    return {
        "HOROVOD_RANK": str(rank),
        "HOROVOD_SIZE": str(size),
        "HOROVOD_LOCAL_RANK": str(local_rank),
        "HOROVOD_LOCAL_SIZE": str(local_size),
        "HOROVOD_CROSS_RANK": str(cross_rank),
        "HOROVOD_CROSS_SIZE": str(size // local_size),
        "HOROVOD_HOSTNAME": host_name(cross_rank),
    }


def open_mpi_rank_variables(env: Mapping[str, str]) -> dict[str, str]:
    """horovod_rank_variables from the rank's Open MPI variables (OMPI_COMM_WORLD_*)."""
    numbers = [int(env[f"OMPI_COMM_WORLD_{name}"]) for name in ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE")]
    return horovod_rank_variables(*numbers)

"""gloo_ranks.py: each rank's Horovod variables for Gloo under mpirun, checked by hand against the layouts mpirun
makes with -map-by slot (rank r on host r // ranks per host). Against Horovod's own assignment
(horovod.runner.common.util.hosts.get_host_assignments): tests/image/test_gloo_rank_oracle.py."""

import pytest
from sagemaker_mxnet_horovod.backends.mpi.gloo_ranks import horovod_rank_variables, open_mpi_rank_variables

NAMES = ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
         "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME")


def table(hosts, per_host):
    """Every rank's variables as (rank, size, local rank, local size, cross rank, cross size, host) rows."""
    size = hosts * per_host
    rows = []
    for rank in range(size):
        variables = horovod_rank_variables(rank, size, rank % per_host, per_host)
        assert set(variables) == set(NAMES)
        rows.append(tuple(int(variables[n]) for n in NAMES[:-1]) + (variables["HOROVOD_HOSTNAME"],))
    return rows


def test_one_host_one_rank():
    assert table(1, 1) == [(0, 1, 0, 1, 0, 1, "host-0")]


def test_two_hosts_one_rank_each():
    assert table(2, 1) == [(0, 2, 0, 1, 0, 2, "host-0"), (1, 2, 0, 1, 1, 2, "host-1")]


def test_two_hosts_two_ranks_each():
    assert table(2, 2) == [(0, 4, 0, 2, 0, 2, "host-0"), (1, 4, 1, 2, 0, 2, "host-0"),
                           (2, 4, 0, 2, 1, 2, "host-1"), (3, 4, 1, 2, 1, 2, "host-1")]


def test_three_hosts_four_ranks_each():
    rows = table(3, 4)
    assert rows[0] == (0, 12, 0, 4, 0, 3, "host-0")
    assert rows[3] == (3, 12, 3, 4, 0, 3, "host-0")
    assert rows[4] == (4, 12, 0, 4, 1, 3, "host-1")
    assert rows[6] == (6, 12, 2, 4, 1, 3, "host-1")
    assert rows[11] == (11, 12, 3, 4, 2, 3, "host-2")
    # Each host holds 4 ranks, each local rank one rank on each of the 3 hosts (Gloo's "cross" scopes).
    assert [sum(1 for r in rows if r[6] == f"host-{h}") for h in range(3)] == [4, 4, 4]
    assert [sorted(r[4] for r in rows if r[2] == local) for local in range(4)] == [[0, 1, 2]] * 4


@pytest.mark.parametrize("rank,size,local_rank,local_size", [
    (1, 4, 0, 2),  # -map-by node: rank 1 is the second host's first rank
    (0, 3, 0, 2),  # unequal hosts
    (4, 4, 0, 2),  # no such rank
])
def test_a_placement_other_than_by_slot_is_refused(rank, size, local_rank, local_size):
    with pytest.raises(ValueError, match="Gloo under mpirun needs ranks placed by slot"):
        horovod_rank_variables(rank, size, local_rank, local_size)


def test_from_open_mpis_variables():
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    assert open_mpi_rank_variables(env) == horovod_rank_variables(3, 4, 1, 2)

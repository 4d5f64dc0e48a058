"""backends/mpi/gloo_ranks.py against Horovod's own assignment of ranks to hosts (horovodrun --gloo's:
horovod.runner.common.util.hosts.get_host_assignments), for the layouts the launcher's mpirun makes (equal slots per
host, by slot). Runs inside the image (make image-tests): Horovod's runner is there only."""

import pytest
from sagemaker_mxnet_horovod.backends.mpi.gloo_ranks import horovod_rank_variables

hosts = pytest.importorskip("horovod.runner.common.util.hosts",
                            reason="needs the image's Horovod: run inside the image (make image-tests)")


@pytest.mark.parametrize("host_count,per_host", [(1, 1), (1, 2), (2, 1), (2, 2), (3, 4), (4, 8)])
def test_every_ranks_variables_are_horovods_own(host_count, per_host):
    size = host_count * per_host
    horovods = hosts.get_host_assignments([hosts.HostInfo(f"h{n}", per_host) for n in range(host_count)], size)
    assert len(horovods) == size
    for slot in horovods:
        ours = horovod_rank_variables(slot.rank, size, slot.rank % per_host, per_host)
        assert (int(ours["HOROVOD_RANK"]), int(ours["HOROVOD_LOCAL_RANK"]), int(ours["HOROVOD_CROSS_RANK"]),
                int(ours["HOROVOD_SIZE"]), int(ours["HOROVOD_LOCAL_SIZE"]), int(ours["HOROVOD_CROSS_SIZE"])) == (
            slot.rank, slot.local_rank, slot.cross_rank, slot.size, slot.local_size, slot.cross_size)
        # Horovod's host for the rank is ours by number: the same ranks share a "local" scope.
        assert ours["HOROVOD_HOSTNAME"] == f"host-{slot.hostname[1:]}"

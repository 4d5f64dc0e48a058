"""backend.py: the Backend interface. A backend says how many of what its job runs, by its own words; one that does
not plan a host's part or run it is no backend (each backend's own: tests/unit/backends/)."""

import pytest
from sagemaker_mxnet_horovod.backends import parameter_server, single
from sagemaker_mxnet_horovod.backends.mpi import backend as mpi
from sagemaker_mxnet_horovod.plan.backend import Backend


def test_each_backend_counts_the_jobs_processes_in_its_own_words():
    assert single.BACKEND.summary(1) == "1 process, no MPI"
    assert mpi.BACKEND.summary(4) == "4 processes, MPI"
    assert parameter_server.BACKEND.summary(1) == "1 worker, parameter server"
    assert parameter_server.BACKEND.summary(2) == "2 workers, parameter server"


def test_a_backend_must_plan_a_hosts_part_and_run_it():
    class PlansOnly(Backend):
        name, label = "half", "half a backend"

        def host_plan(self, inputs):
            return None

    with pytest.raises(TypeError, match="run"):
        PlansOnly()

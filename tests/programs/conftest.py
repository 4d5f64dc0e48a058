"""Fixtures for the program tests (inside the image: `make image-tests`).

Everything runs for real: the programs as subprocesses (under mpirun for the multi-rank tests), data made
by the data tool into temp dirs. Nothing is downloaded.
"""

import pytest

from programs.helpers import horovod_problem, make_mnist


def pytest_configure(config):
    config.addinivalue_line("markers", "mpi: runs several ranks under mpirun (needs horovod + OpenMPI)")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


@pytest.fixture(scope="session")  # session scope: checked before the session-scoped data fixtures
def needs_horovod():
    problem = horovod_problem()
    if problem:
        pytest.skip(problem)


@pytest.fixture(scope="session")
def tiny_mnist(tmp_path_factory):
    """600/200 samples: enough to train a bit, fast enough for many runs."""
    return make_mnist(tmp_path_factory.mktemp("tiny") / "mnist", 600, 200)


@pytest.fixture(scope="session")
def small_mnist(tmp_path_factory):
    """6000/1000 samples: what the >= 0.95 accuracy runs use."""
    return make_mnist(tmp_path_factory.mktemp("small") / "mnist", 6000, 1000)

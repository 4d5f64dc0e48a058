"""Fixtures for the program tests (inside the image: `make image-tests`).

Everything runs for real: the programs as subprocesses (under mpirun for the multi-rank tests), data made
by the data tool into temp dirs. Nothing is downloaded.
"""

import shutil

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


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory, request):
    """mktemp for a module's shared runs, whose directories are removed after its last test when none of the session's
    tests failed meanwhile (else kept, to be read). An R-CNN run writes weights, checkpoints and exports of 150 MB
    each, 1-3 GB a run: kept to the session's end, the image lane's container held 15 GB after 10 of its 28 minutes
    and filled the disk (docs/testing.md)."""
    made, failed_before = [], request.session.testsfailed

    def mktemp(name):
        made.append(tmp_path_factory.mktemp(name))
        return made[-1]

    yield mktemp
    if request.session.testsfailed == failed_before:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)

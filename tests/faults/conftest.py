import os
import subprocess
import time

import pytest
from fault_harness import OBSERVATIONS, Context, format_report, make_mnist_data, summary
from local_job import DOCKER

SUITE_STARTED = time.monotonic()


@pytest.fixture(scope="session")
def image():
    name = os.environ.get("IMAGE", "sagemaker-mxnet-horovod:cpu")
    if subprocess.run([DOCKER, "image", "inspect", name], capture_output=True, check=False).returncode != 0:
        pytest.fail(f"image {name} not found: run `make build` first (or set IMAGE)")
    return name


@pytest.fixture(scope="session")
def fault_data(image, tmp_path_factory):
    return make_mnist_data(image, tmp_path_factory.mktemp("fault-data"))


@pytest.fixture
def context(image, fault_data, tmp_path):
    mnist, shards = fault_data
    yield Context(image=image, workdir=tmp_path, mnist=mnist, shards=shards)
    # A scenario that mounted a filesystem and failed before unmounting it must not leave it behind.
    for mount in (tmp_path / "checkpoint-fs",):
        if mount.is_mount():
            subprocess.run(["umount", str(mount)], check=False)


def pytest_terminal_summary(terminalreporter):
    if OBSERVATIONS:
        terminalreporter.write_line("")
        terminalreporter.write_line(format_report(OBSERVATIONS, "fault scenarios (this image's launcher)"))
        terminalreporter.write_line(f"fault suite: {len(OBSERVATIONS)} scenarios in "
                                    f"{time.monotonic() - SUITE_STARTED:.0f} s, {summary(OBSERVATIONS)}")

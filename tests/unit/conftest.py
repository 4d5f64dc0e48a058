"""tests/unit mirrors the launcher's folders (core/, parse/, plan/, act/, diagnose/, compat/, backends/) and the image's
two other packages (mxnet_container/, mxnet_data/). This conftest puts tests/unit itself on sys.path, so every test
module, whatever its folder, imports the shared helpers of the unit_helpers package beside it (unit_paths,
plan_cases, rule_cases, live_output, stack_launcher, stacks_request, late_peers), and holds the fixtures tests of several folders use."""

import signal
import subprocess

import pytest


@pytest.fixture
def restore_signal_handlers():
    """A run handles SIGTERM/SIGINT itself (core/stop.py hands them to it), and SIGUSR1 (every rank's stacks): give
    the test process its own handlers back afterwards."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.fixture
def tmpfs_64m(tmp_path):
    """A tmpfs of 64 MiB (Docker's /dev/shm), mounted for the test: needs root (CAP_SYS_ADMIN), as on the host."""
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(tmp_path)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (mount: {mounted.stderr.strip()}); root on the host can")
    yield tmp_path
    subprocess.run(["umount", str(tmp_path)], check=True)

"""tests/unit mirrors the launcher's folders (core/, parse/, plan/, act/, diagnose/, compat/, backends/) and the image's
two other packages (mxnet_container/, mxnet_data/). This conftest puts tests/unit itself on sys.path, so every test
module, whatever its folder, imports the shared helpers beside it (unit_paths.py, plan_cases.py, live_output.py,
stacks_request.py, late_peers.py), and holds the fixtures tests of several folders use."""

import signal

import pytest


@pytest.fixture
def restore_signal_handlers():
    """A run handles SIGTERM/SIGINT itself (core/stop.py hands them to it), and SIGUSR1 (every rank's stacks): give
    the test process its own handlers back afterwards."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)

"""Fixtures of the tests of act/: what a run installs in the test process, undone afterwards."""

import signal

import pytest


@pytest.fixture
def restore_signal_handlers():
    """A run handles SIGTERM/SIGINT itself (it forwards them to its job or its ranks), and SIGUSR1 (every rank's
    stacks): give the test process its own handlers back afterwards."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)

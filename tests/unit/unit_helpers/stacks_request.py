"""A user's stacks request in the unit tests of act/: once the waiting program is where its stacks are asserted, the
launcher (this process) gets SIGUSR1, and once the dump is written the program is let go. A uniquely named helper,
as every helper under tests/."""

import os
import signal
import threading
import time
from pathlib import Path

DEADLINE_S = 30  # generous: the test must not hang when no dump comes; not a speed bound


def ask_for_stacks_then_release(tmp_path: Path) -> list[str]:
    """Start the request in a thread; the returned list gets a problem when the dump did not come in time.

    The program writes `release.waiting` where it waits, then opens the `release` FIFO, which this opens for
    writing once the dump's summary is in tmp_path/data/stacks."""
    problems: list[str] = []

    def ask_then_release() -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not (tmp_path / "release.waiting").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGUSR1)  # what `train stacks` and `docker kill --signal USR1` send
        while not list((tmp_path / "data" / "stacks").glob("*/summary.txt")) and time.monotonic() < deadline:
            time.sleep(0.05)
        problems.extend([] if time.monotonic() < deadline else [f"no dump within {DEADLINE_S} s"])
        (tmp_path / "release").write_text("")  # opened for writing: the program's open() returns

    threading.Thread(target=ask_then_release, daemon=True).start()
    return problems

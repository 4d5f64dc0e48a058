"""Waiting for a line of a running process's output, with a deadline (test_supervise, test_cli). A uniquely
named helper module, as every helper under tests/."""

import threading


def wait_for_line(stream, text: str, timeout: float) -> bool:
    """Read `stream` in a thread until a line contains `text`; whether one did within `timeout` seconds.
    The thread stops reading at that line, so the caller may read the rest (communicate())."""
    seen = threading.Event()

    def read() -> None:
        for line in stream:
            if text in line:
                seen.set()
                return

    threading.Thread(target=read, daemon=True).start()
    return seen.wait(timeout)

"""Where the repository's parts are, for unit tests in any folder of tests/unit."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SRC = REPO / "container" / "src"  # the launcher's source, for tests that start it as a process
ENTRYPOINTS = REPO / "entrypoints"  # the built-in programs and their launch rules

"""tests/conftest.py's TESTS_MUST_NOT_SKIP=1 (set by `make image-tests` and `make sdk-tests`, and by CI's host runs in
`.ci/run`): every kind of skip fails the run, a whole module skipped at collection (module-level
pytest.importorskip) as much as one test's skip. Runs pytest on a throwaway test directory holding a copy of that
conftest; reads `.ci/run` for where CI sets it."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFTEST = ROOT / "tests" / "conftest.py"

MODULE_SKIPS = """\
import pytest

pytest.importorskip("a_module_that_is_not_installed", reason="needs the image")


def test_never_collected():
    pass
"""

TEST_SKIPS = """\
import pytest


@pytest.fixture
def horovod():
    pytest.skip("needs horovod")


def test_skipped_by_its_fixture(horovod):
    pass


def test_passes():
    pass
"""


def run_pytest(tmp_path: Path, module: str, must_not_skip: bool) -> subprocess.CompletedProcess:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_case.py").write_text(module)
    env = {"PATH": "/usr/bin:/bin", "TESTS_MUST_NOT_SKIP": "1" if must_not_skip else ""}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("module", [MODULE_SKIPS, TEST_SKIPS], ids=["module-at-collection", "test"])
def test_a_skip_is_a_skip_by_default(tmp_path, module):
    done = run_pytest(tmp_path, module, must_not_skip=False)
    assert done.returncode in (0, 5), done.stdout  # 5: no test ran, the module's one was skipped
    assert "1 skipped" in done.stdout.splitlines()[-1], done.stdout


def test_a_module_skipped_at_collection_fails_the_run(tmp_path):
    done = run_pytest(tmp_path, MODULE_SKIPS, must_not_skip=True)
    assert done.returncode != 0, done.stdout
    assert "test_case.py skipped at collection where nothing may skip (TESTS_MUST_NOT_SKIP=1)" in done.stdout
    assert "needs the image" in done.stdout
    assert "1 error" in done.stdout.splitlines()[-1], done.stdout


def test_a_skipped_test_fails_the_run(tmp_path):
    done = run_pytest(tmp_path, TEST_SKIPS, must_not_skip=True)
    assert done.returncode == 1, done.stdout
    assert "skipped where nothing may skip (TESTS_MUST_NOT_SKIP=1): Skipped: needs horovod" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("1 passed, 1 error"), done.stdout  # an error in its setup


def test_ci_runs_the_host_tests_where_nothing_may_skip():
    # CI runs as root with Docker: the host tests that skip elsewhere (a tmpfs to mount, a namespace to make) can run
    # there, so a skip is a failure (make unit on the lowest and highest Python, and make test's host pytest).
    commands = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
                if re.match(r"\s*(time\s+)?(\w+=\S*\s+)*make\s+(unit|test)\b", line)]
    assert [re.search(r"make\s+(unit|test)\b", line).group(1) for line in commands] == ["unit", "test"], commands
    assert [line for line in commands if not re.match(r"(time\s+)?(\w+=\S*\s+)*TESTS_MUST_NOT_SKIP=1\s", line)] == []

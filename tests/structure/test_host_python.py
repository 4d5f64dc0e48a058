"""The host's Python range (docs/testing.md): the Makefile refuses a Python older than HOST_PYTHON_MIN before it
makes a venv or runs anything, naming the version it found and the one it needs; ruff's target-version and the
launcher package's requires-python say the same floor. Runs make; no Docker."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = (ROOT / "Makefile").read_text()
FLOOR = re.search(r"^HOST_PYTHON_MIN := (\d+)\.(\d+)$", MAKEFILE, re.MULTILINE).groups()


def make(*args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    env.pop("MAKEFLAGS", None)
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *args], capture_output=True, text=True,
                          timeout=120, env=env, check=False)


def fake_python(folder: Path, version: str) -> Path:
    """A stand-in that answers any question with `version`: what the Makefile asks an interpreter is its version."""
    path = folder / f"python-{version}"
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return path


def test_the_floor_is_3_10():
    assert FLOOR == ("3", "10")


def test_ruff_and_the_package_name_the_same_floor():
    floor = "".join(FLOOR)
    assert re.search(rf'^target-version = "py{floor}"$', (ROOT / "ruff.toml").read_text(), re.MULTILINE)
    pyproject = (ROOT / "container" / "pyproject.toml").read_text()
    assert re.search(rf'^requires-python = ">={".".join(FLOOR)}"$', pyproject, re.MULTILINE)


@pytest.mark.parametrize("version", ["3.9.18", "2.7.18", "3.6.15"])
def test_an_older_python_is_refused_before_a_venv_is_made(tmp_path, version):
    venv = tmp_path / "venv"
    done = make("tools", f"PYTHON={fake_python(tmp_path, version)}", f"VENV={venv}")
    assert done.returncode != 0
    assert f"is Python {version}; the host side needs Python 3.10 or newer" in done.stderr, done.stderr
    assert not venv.exists()


@pytest.mark.parametrize("version", ["3.10.0", "3.11.2", "3.13.0", "4.0.0"])
def test_a_python_in_the_range_passes_the_check(tmp_path, version):
    done = make("check-python", f"PYTHON={fake_python(tmp_path, version)}")
    assert done.returncode == 0, done.stderr


def test_a_python_that_does_not_run_is_named(tmp_path):
    done = make("check-python", f"PYTHON={tmp_path / 'no-such-python'}")
    assert done.returncode != 0
    assert f"PYTHON={tmp_path / 'no-such-python'} does not run" in done.stderr, done.stderr


def test_the_demo_refuses_an_older_python_before_it_builds(tmp_path):
    calls = tmp_path / "docker-calls"
    docker = tmp_path / "docker"
    docker.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\nexit 1\n")
    docker.chmod(0o755)
    done = make("demo", f"PYTHON={fake_python(tmp_path, '3.9.18')}", f"DOCKER={docker}")
    assert done.returncode != 0
    assert "is Python 3.9.18; the host side needs Python 3.10 or newer" in done.stderr, done.stderr
    assert not calls.exists(), calls.read_text()


def test_this_python_passes_the_check():
    done = make("check-python", f"PYTHON={sys.executable}")
    assert done.returncode == 0, done.stderr


def older_real_pythons() -> list:
    """Real interpreters older than the floor on this machine: on PATH as python3.N, or under pyenv's folder."""
    candidates = [shutil.which(f"python3.{minor}") for minor in range(6, int(FLOOR[1]))]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(path) for path in pyenv.glob("3.*/bin/python3"))
    found = []
    for candidate in filter(None, candidates):
        asked = subprocess.run([candidate, "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"],
                               capture_output=True, text=True, timeout=60, check=False)
        version = asked.stdout.strip()
        if asked.returncode == 0 and tuple(map(int, version.split(".")[:2])) < tuple(map(int, FLOOR)):
            found.append((candidate, version))
    return found


def test_a_real_older_python_is_refused(tmp_path):
    older = older_real_pythons()
    if not older:
        pytest.skip("no Python older than 3.10 on this machine (python3.6-3.9 on PATH or under pyenv)")
    python, version = older[-1]
    done = make("tools", f"PYTHON={python}", f"VENV={tmp_path / 'venv'}")
    assert done.returncode != 0
    assert f"is Python {version}; the host side needs Python 3.10 or newer" in done.stderr, done.stderr
    assert not (tmp_path / "venv").exists()

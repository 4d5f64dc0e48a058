"""scripts/cached_venv.sh, the venvs of make tools, sdk-venvs and audit kept outside the clone: a second clone with
the same requirements file and Python reuses the venv, a changed file gets a new one, an interrupted one is made
again, an old venv in the clone gives way to the link, and VENV_CACHE= makes the venv in the clone as before.

The Python given is a stand-in for `-m venv` (a folder with a pyvenv.cfg and a pip that records its arguments:
what is cached is under test here, not venv or pip) and the real interpreter for everything else (the key)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "cached_venv.sh"

FAKE_PYTHON = """#!/bin/sh
if [ "$1" = -m ] && [ "$2" = venv ]; then
  echo "$3" >> {made}
  mkdir -p "$3/bin"
  echo "home = /usr/bin" > "$3/pyvenv.cfg"
  printf '#!/bin/sh\\necho "$@" >> "%s/pip-calls"\\n' "$3" > "$3/bin/pip"
  chmod +x "$3/bin/pip"
  exit 0
fi
exec {python} "$@"
"""


@pytest.fixture
def python(tmp_path):
    path = tmp_path / "python"
    path.write_text(FAKE_PYTHON.format(made=tmp_path / "venvs-made", python=sys.executable))
    path.chmod(0o755)
    return path


def made(tmp_path) -> list:
    record = tmp_path / "venvs-made"
    return record.read_text().split() if record.exists() else []


def clone(tmp_path, name, requirements="pytest==8.3.4\n") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "requirements-dev.txt").write_text(requirements)
    return folder


def cached_venv(python, folder, link=".venv", cache=None, *pip_args):
    env = {**os.environ, "VENV_CACHE": "" if cache is None else str(cache)}
    return subprocess.run([str(SCRIPT), str(python), link, "requirements-dev.txt", *pip_args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_second_clone_reuses_the_venv_and_pip_gets_the_requirements_and_its_arguments(tmp_path, python):
    cache = tmp_path / "cache"
    first, second = clone(tmp_path, "first"), clone(tmp_path, "second")
    for folder in (first, second):
        done = cached_venv(python, folder, ".venv", cache, "--cert", "/etc/ca.pem")
        assert done.returncode == 0, done.stderr
    venv = (first / ".venv").resolve()
    assert (second / ".venv").resolve() == venv and (first / ".venv").is_symlink()
    assert venv.parent == cache / "venvs" and venv.name.startswith("requirements-dev-py")
    assert made(tmp_path) == [str(venv)]
    assert (venv / "pip-calls").read_text() == \
        "install --quiet --disable-pip-version-check --cert /etc/ca.pem -r requirements-dev.txt\n"
    assert (venv / ".installed").is_file()


def test_a_changed_requirements_file_gets_a_venv_of_its_own(tmp_path, python):
    cache = tmp_path / "cache"
    folder = clone(tmp_path, "clone")
    assert cached_venv(python, folder, ".venv", cache).returncode == 0
    before = (folder / ".venv").resolve()
    (folder / "requirements-dev.txt").write_text("pytest==8.3.5\n")
    assert cached_venv(python, folder, ".venv", cache).returncode == 0
    after = (folder / ".venv").resolve()
    assert after != before and made(tmp_path) == [str(before), str(after)]
    assert (before / ".installed").is_file()  # another clone may still use it


def test_an_interrupted_venv_is_made_again(tmp_path, python):
    cache = tmp_path / "cache"
    folder = clone(tmp_path, "clone")
    assert cached_venv(python, folder, ".venv", cache).returncode == 0
    venv = (folder / ".venv").resolve()
    (venv / ".installed").unlink()  # as when pip failed or was stopped half-way
    assert cached_venv(python, folder, ".venv", cache).returncode == 0
    assert made(tmp_path) == [str(venv), str(venv)] and (venv / ".installed").is_file()


@pytest.mark.parametrize("stamp", [".tools-installed", ".installed"])
def test_a_venv_make_made_in_the_clone_gives_way_to_the_link_and_anything_else_stays(tmp_path, python, stamp):
    cache = tmp_path / "cache"
    folder = clone(tmp_path, "clone")
    (folder / ".venv").mkdir()
    (folder / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (folder / ".venv" / stamp).touch()  # the old Makefile's stamp for the tools, or this script's
    assert cached_venv(python, folder, ".venv", cache).returncode == 0
    assert (folder / ".venv").is_symlink()
    for name, files in (("mine", {"notes.txt": "keep me"}), ("own-venv", {"pyvenv.cfg": "home = /usr/bin\n"})):
        (folder / name).mkdir()
        for file, text in files.items():
            (folder / name / file).write_text(text)
        done = cached_venv(python, folder, name, cache)
        assert done.returncode == 1, done.stderr
        assert f"cached_venv: {name} exists and is not a venv make made; not replacing it" in done.stderr
        assert [(p.name, p.read_text()) for p in (folder / name).iterdir()] == list(files.items())


def test_without_a_cache_the_venv_is_made_in_the_clone_and_again_when_the_file_is_newer(tmp_path, python):
    folder = clone(tmp_path, "clone")
    assert cached_venv(python, folder, ".venv", tmp_path / "cache").returncode == 0  # a link from an earlier make
    assert cached_venv(python, folder, ".venv").returncode == 0
    venv = folder / ".venv"
    assert venv.is_dir() and not venv.is_symlink() and made(tmp_path)[-1] == ".venv"
    assert cached_venv(python, folder, ".venv").returncode == 0
    assert len(made(tmp_path)) == 2  # up to date: not made again
    stamp = (venv / ".installed").stat().st_mtime
    os.utime(folder / "requirements-dev.txt", (stamp + 10, stamp + 10))
    assert cached_venv(python, folder, ".venv").returncode == 0
    assert len(made(tmp_path)) == 3


def test_make_tools_and_sdk_venvs_link_into_the_cache(tmp_path, python):
    cache, links = tmp_path / "cache", tmp_path / "links"
    done = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "tools", "sdk-venvs", f"PYTHON={python}",
                           f"VENV={links / 'venv'}", f"SDK_VENVS={links}", f"VENV_CACHE={cache}", "CA_BUNDLE="],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={key: value for key, value in os.environ.items() if key != "MAKEFLAGS"})
    assert done.returncode == 0, done.stdout + done.stderr
    names = {link.name: link.resolve().name.rsplit("-py", 1)[0] for link in links.iterdir()}
    assert names == {"venv": "requirements-dev", "sdk-v2": "tests-sdk-requirements-v2",
                     "sdk-v3": "tests-sdk-requirements-v3"}
    assert all(link.resolve().parent == cache / "venvs" for link in links.iterdir())
    shutil.rmtree(cache)

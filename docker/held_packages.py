"""Write the image's held packages: every distribution in the venv at its installed version, as a pip constraints file.

usage: held_packages.py cpu|gpu LOCK OUTPUT [SITE_DIR]   (docker/finish-image.sh, the last RUN of the image stage)

The launcher installs a user's requirements.txt with this file as a constraint (act/requirements.py), so that a
requirement cannot replace numpy, MXNet, Horovod or anything they need. Written from what is installed, checked
against the flavor's lock (docker/constraints-FLAVOR.txt): every locked package the venv has is at the locked
version, and only the builder's own tools are missing. SITE_DIR: where the distributions are (default: this
Python's own site-packages).
"""

import re
import sys
import sysconfig
from importlib import metadata

# In the lock but not in the image: build tools, used and removed (cmake) or never installed into /opt/venv (nvcc).
BUILDER_ONLY = {"cmake", "nvidia-cuda-nvcc-cu11"}

HEADER = """\
# The {shown} image's Python packages, each at its installed version: a pip constraints file. The launcher installs a
# user's requirements.txt with it (docs/compatibility.md#requirementstxt), so no requirement replaces them silently.
# Written by docker/held_packages.py at build time from /opt/venv, checked against docker/constraints-{flavor}.txt.
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: str) -> dict:
    pins = {}
    with open(path, encoding="utf-8") as lock:
        for line in lock:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, version = line.partition("==")
                pins[canonical(name)] = version.strip()
    return pins


def installed(site_dir: str) -> dict:
    return {canonical(dist.metadata["Name"]): dist.version for dist in metadata.distributions(path=[site_dir])}


def disagreements(held: dict, lock: dict) -> list:
    """What is wrong with the venv against the lock, in words; empty when they agree."""
    problems = [f"{name} is {held[name]} in the venv, {version} in the lock" for name, version in sorted(lock.items())
                if name in held and held[name] != version]
    problems += [f"{name}=={version} is locked but not installed" for name, version in sorted(lock.items())
                 if name not in held and name not in BUILDER_ONLY]
    return problems


def main(flavor: str, lock_path: str, output: str, site_dir: str = "") -> int:
    held = installed(site_dir or sysconfig.get_path("purelib"))
    problems = disagreements(held, read_lock(lock_path))
    if problems:
        sys.exit("held_packages.py: the venv does not match the lock: " + "; ".join(problems))
    with open(output, "w", encoding="utf-8") as out:
        out.write(HEADER.format(shown=flavor.upper(), flavor=flavor))
        out.writelines(f"{name}=={held[name]}\n" for name in sorted(held))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

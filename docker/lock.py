"""Turn a `pip install --dry-run --report` JSON into the constraints file (name==version per line).

Run by the Dockerfile's cpu-lock stage; `make lock` writes the result to docker/constraints-cpu.txt.
Local-path requirements (the opencv-python stand-in) are left out: constraints can only name
packages from an index.
"""

import json
import re
import sys

HEADER = """\
# Every package in the CPU image's /opt/venv, transitive ones included, resolved together on the
# image's Python {python}. Used as PIP_CONSTRAINT by the cpu-venv stage of docker/Dockerfile.
# GENERATED, do not edit: change the version ARGs in docker/Dockerfile or docker/requirements-*.txt,
# then run `make lock` (add CA_BUNDLE=... / PIP_INDEX_URL=... as for `make build`).
"""


def main(report_path: str) -> int:
    with open(report_path, encoding="utf-8") as f:
        report = json.load(f)
    pins = {}
    for item in report["install"]:
        if "dir_info" in item.get("download_info", {}):
            continue
        meta = item["metadata"]
        pins[re.sub(r"[-_.]+", "-", meta["name"]).lower()] = meta["version"]
    python = report["environment"]["python_full_version"]
    sys.stdout.write(HEADER.format(python=python))
    sys.stdout.writelines(f"{name}=={pins[name]}\n" for name in sorted(pins))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""Turn a `pip install --dry-run --report` JSON into the constraints file (name==version per line).

usage: lock.py REPORT.json [cpu|gpu]   (default cpu)

Run by the Dockerfile's cpu-lock and gpu-lock stages; `make lock` and `make lock-gpu` write the result
to docker/constraints-cpu.txt and docker/constraints-gpu.txt. Local-path requirements (the
opencv-python stand-in) are left out: constraints can only name packages from an index.
"""

import json
import re
import sys

HEADERS = {
    "cpu": """\
# Every package in the CPU image's /opt/venv, transitive ones included, resolved together on the
# image's Python {python}. Used as PIP_CONSTRAINT by the cpu-venv stage of docker/Dockerfile.
# GENERATED, do not edit: change the version ARGs in docker/Dockerfile or docker/requirements-*.txt,
# then run `make lock` (add CA_BUNDLE=... / PIP_INDEX_URL=... as for `make build`).
""",
    "gpu": """\
# Every package in the GPU image's /opt/venv, transitive ones included, plus the builder-only
# nvidia-cuda-nvcc-cu11 (CUDA headers for compiling Horovod), resolved together on the image's Python
# {python}. Used as PIP_CONSTRAINT by the cuda-toolkit and gpu-venv stages of docker/Dockerfile.
# GENERATED, do not edit: change the version ARGs in docker/Dockerfile or docker/requirements-*.txt,
# then run `make lock-gpu` (add CA_BUNDLE=... / PIP_INDEX_URL=... as for `make build-gpu`).
""",
}


def main(report_path: str, flavor: str = "cpu") -> int:
    with open(report_path, encoding="utf-8") as f:
        report = json.load(f)
    pins = {}
    for item in report["install"]:
        if "dir_info" in item.get("download_info", {}):
            continue
        meta = item["metadata"]
        pins[re.sub(r"[-_.]+", "-", meta["name"]).lower()] = meta["version"]
    python = report["environment"]["python_full_version"]
    sys.stdout.write(HEADERS[flavor].format(python=python))
    sys.stdout.writelines(f"{name}=={pins[name]}\n" for name in sorted(pins))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))

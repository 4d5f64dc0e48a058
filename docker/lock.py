"""Turn `pip install --dry-run --report` JSONs into the constraints file (name==version per line).

usage: lock.py cpu|gpu REPORT.json [REPORT.json ...]   (the stack's report, then requirements-smdebug.txt's)

Run by the Dockerfile's lock stage (FLAVOR=cpu or gpu); `make lock` and `make lock-gpu` write the result
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


def main(flavor: str, *report_paths: str) -> int:
    pins = {}
    for report_path in report_paths:
        with open(report_path, encoding="utf-8") as f:
            report = json.load(f)
        for item in report["install"]:
            if "dir_info" in item.get("download_info", {}):
                continue
            meta = item["metadata"]
            name = re.sub(r"[-_.]+", "-", meta["name"]).lower()
            if pins.setdefault(name, meta["version"]) != meta["version"]:
                sys.exit(f"lock.py: {name} resolved to {pins[name]} and {meta['version']}")
        python = report["environment"]["python_full_version"]
    sys.stdout.write(HEADERS[flavor].format(python=python))
    sys.stdout.writelines(f"{name}=={pins[name]}\n" for name in sorted(pins))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

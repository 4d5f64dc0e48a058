"""What a user's requirements.txt left installed, as each rank (MPI) or parameter-server worker sees it: one line per
process, `installed on HOST: name version, ...`, for the fault suite's requirements rows. A parameter-server worker
first sums a key with the others (a dist_sync script: the job's servers and scheduler need their workers)."""

import os
from importlib.metadata import PackageNotFoundError, version

PACKAGES = ("smmh-harmless", "pycocotools", "numpy")


def installed(name: str) -> str:
    try:
        return f"{name} {version(name)}"
    except PackageNotFoundError:
        return f"{name} none"


if os.environ.get("DMLC_ROLE") == "worker":
    import mxnet as mx

    kv = mx.kv.create("dist_sync")
    kv.init(0, mx.nd.zeros((1,)))
    kv.push(0, mx.nd.ones((1,)))
print(f"installed on {os.environ.get('SM_CURRENT_HOST')}: {', '.join(map(installed, PACKAGES))}", flush=True)

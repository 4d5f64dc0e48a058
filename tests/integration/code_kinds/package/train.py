"""A Python-package entry point: the toolkit pip-installs the code directory and runs `python -m train`."""

import importlib.metadata
import json
import os
import sys

import helper

record = {
    "module": __spec__.name if __spec__ else None,  # None under `python train.py`
    "version": importlib.metadata.version("user-trainer"),
    "helper": helper.GREETING,
    "args": sys.argv[1:],
}
rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"rank-{rank}.json"), "w") as out:
    json.dump(record, out)

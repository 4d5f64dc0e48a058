"""Helpers AWS's MXNet images offer training scripts: saving a Module as those images' MXNet model server
loads it, and the host that plays scheduler (the one that saves)."""

from __future__ import annotations

import json
import os

SYMBOL_PATH = "model-symbol.json"
PARAMS_PATH = "model-0000.params"
SHAPES_PATH = "model-shapes.json"


def scheduler_host(hosts):
    """The job's first host: the parameter server's scheduler in AWS's images, the host that saves."""
    return hosts[0]


def save(model_dir, model, current_host=None, hosts=None):
    """Save an mxnet.mod.Module to model_dir, on the scheduler host only (elsewhere nothing is written):
    model-symbol.json (its graph), model-0000.params (its parameters) and model-shapes.json (its inputs'
    names and shapes, [{"name": ..., "shape": [...]}]). current_host and hosts default to SM_CURRENT_HOST
    and SM_HOSTS."""
    current_host = current_host or os.environ["SM_CURRENT_HOST"]
    hosts = hosts or json.loads(os.environ["SM_HOSTS"])
    if current_host != scheduler_host(hosts):
        return
    model.symbol.save(os.path.join(model_dir, SYMBOL_PATH))
    model.save_params(os.path.join(model_dir, PARAMS_PATH))
    shapes = [{"name": desc.name, "shape": list(desc.shape)} for desc in model.data_shapes]
    with open(os.path.join(model_dir, SHAPES_PATH), "w") as file:
        json.dump(shapes, file)

"""What rank 0 leaves in the model directory (SageMaker's model.tar.gz), written atomically:

  <model>-best.params, <model>-final.params   Gluon parameters (net.save_parameters) of the best and the last epoch
  model.json           how to load them, the classes, the run's history
  classes.json         the classes in the network's order (class i is entry i): [{"id": category id, "name": ...}]
  metrics.json         the validation metrics of the best epoch (with each class's AP) and of the last
  model-symbol.json, model-0000.params   the best epoch's network, hybridized and exported for serving
                       (mx.gluon.SymbolBlock.imports(symbol, ["data"], params)); the final epoch's without validation

Standard library only at import time; the network and MXNet come as arguments.
"""

import os

from mxnet_programs.files import atomic_save, atomic_write_json, export_hybrid_block

CLASSES_FILE = "classes.json"
METRICS_FILE = "metrics.json"
DESCRIPTION_FILE = "model.json"
EXPORT_NAME = "model"  # model-symbol.json, model-0000.params: the names AWS's MXNet serving containers look for


def params_path(model_dir, net_name, tag):
    return os.path.join(model_dir, f"{net_name}-{tag}.params")


def classes_json(class_names, category_ids):
    return [{"id": cid, "name": name} for cid, name in zip(category_ids, class_names)]


def save(net, model_dir, net_name, tag, description, class_names, category_ids, history, best_epoch, main_metric):
    """<model>-<tag>.params, classes.json, metrics.json and model.json (`description`). Returns the params path."""
    path = params_path(model_dir, net_name, tag)
    atomic_save(path, net.save_parameters)
    atomic_write_json(os.path.join(model_dir, CLASSES_FILE), classes_json(class_names, category_ids))
    validated = [r for r in history if main_metric in r]
    best = [r for r in validated if r["epoch"] == best_epoch]
    atomic_write_json(os.path.join(model_dir, METRICS_FILE), {
        "main_metric": main_metric, "best_epoch": best_epoch, "best": best[0] if best else None,
        "last": validated[-1] if validated else None, "classes": class_names})
    describe(model_dir, description)
    return path


def describe(model_dir, description):
    """model.json: `description` and the files the model dir holds."""
    files = sorted(n for n in os.listdir(model_dir) if n.endswith((".params", ".json")) and not n.startswith("."))
    atomic_write_json(os.path.join(model_dir, DESCRIPTION_FILE), dict(description, files=files))


def export(mx, net, params_file, model_dir, ctx, input_side):
    """The network with `params_file`'s weights, hybridized and exported as model-symbol.json + model-0000.params:
    one inference forward on an input_side-pixel square builds the inference graph (its symbol holds no input
    size: any image size runs, given anchors enough for the proposals kept). Returns the two paths."""
    net.load_parameters(params_file, ctx=ctx)
    net.hybridize()  # a new graph: the one cached last was training's or validation's
    net(mx.nd.zeros((1, 3, input_side, input_side), ctx=ctx[0]))
    mx.nd.waitall()
    return export_hybrid_block(net, model_dir, name=EXPORT_NAME, epoch=0)

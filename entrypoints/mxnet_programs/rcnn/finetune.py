"""Fine-tuning: the network starts from an earlier detector's weights, with the job's classes.

The weights (``--finetune-from PATH``, else the ``model`` channel: the SageMaker SDK's ``model_uri``) are one of:
  * this image's model output: its model directory or its model.tar.gz (model.json names the network and its
    classes; the best epoch's <model>-best.params is used, else <model>-final.params);
  * a GluonCV detector's params file (net.save_parameters), e.g. faster_rcnn_resnet50_v1b_coco-447328d8.params from
    GluonCV's model store; its classes come from a classes.json beside it, else, with 80 classes, are COCO's 80;
  * a directory holding one such file (and its classes.json).

The rule is GluonCV's ``net.reset_class(classes, reuse_weights=<the names both lists hold>)``, as its
``*_custom(classes, transfer=...)`` models apply it: every weight but the class-specific rows comes from the file; a
class whose name the earlier detector also has takes its rows of the class and box predictors (and the mask
predictor), those of every other class start as a new network's, and the class predictor's background row comes
with the matched classes when at least one matches. The file must be of the same architecture (--network,
--use-fpn, the model): anything else stops the job at start, exit 2, naming the file.

`find_source` runs before MXNet (standard library: a missing or unusable path fails on every rank in well under a
second); `start_from` applies the weights to the built network.
"""

import dataclasses
import json
import os
import re
import tarfile
import tempfile

from sagemaker_mxnet_data.coco_categories import COCO_CLASS_NAMES

from mxnet_programs.process import ProgramError

DESCRIPTION_FILE, CLASSES_FILE = "model.json", "classes.json"  # as model_files writes them
EXPORTED_PARAMS = "model-0000.params"  # the exported network's: names of the symbol, not of the Gluon blocks
ARCHIVES = (".tar.gz", ".tgz")
# GluonCV's model store names its files <model>-<first 8 hex digits of their SHA-1>.params
ZOO_FILE = re.compile(r"((?:faster|mask)_rcnn_\w+)-[0-9a-f]{8}\.params")
# Parameters of GluonCV's target generators: constants (box encoder means and stds), not learned; GluonCV's own
# detectors lack them (its loader allows them missing) and a network made by training has them.
NOT_LEARNED = re.compile(r"(^|\.)_target_generator\.")
CLASSES_BESIDE = f"put a {CLASSES_FILE} beside it: a JSON list of its class names in its class order (or of " \
                 "{\"id\": ..., \"name\": ...})"


@dataclasses.dataclass(frozen=True)
class Source:
    """The weights to start from: the params file, its classes (None: COCO's 80 if it has 80), whence they came."""
    given: str
    params: str
    classes: tuple | None
    classes_from: str | None
    model: str | None  # its network's GluonCV name, when known

    def describe(self):
        inside = self.params == self.given or self.params.startswith(self.given.rstrip("/") + "/")
        where = self.params if inside else f"{self.given} (its {os.path.basename(self.params)})"
        return where + (f", classes from its {os.path.basename(self.classes_from)}" if self.classes_from else "")


def find_source(given, net_name, extract_dir=None):
    """The Source of the weights `given` (a path: file, directory or model.tar.gz), checked with the standard
    library; an archive is unpacked into extract_dir (a new temporary directory by default)."""
    if not os.path.exists(given):
        raise ProgramError(f"fine-tuning weights not found: {given} does not exist")
    path = given
    if os.path.isdir(path):
        archives = [n for n in sorted(os.listdir(path)) if n.endswith(ARCHIVES)]
        if not _files(path, ".params") and len(archives) == 1:
            path = os.path.join(path, archives[0])  # the SDK's model channel: model.tar.gz as it was uploaded
    if os.path.isfile(path) and path.endswith(ARCHIVES):
        path = _unpack(path, extract_dir or tempfile.mkdtemp(prefix="rcnn-finetune-"))
    source = _from_directory(given, path) if os.path.isdir(path) else _from_file(given, path)
    if source.model is not None and source.model != net_name:
        raise ProgramError(f"fine-tuning weights {source.params} are a {source.model}, but this job trains a "
                           f"{net_name} (--network, --use-fpn): fine-tune from a detector of the same architecture")
    return source


def _files(directory, suffix):
    return sorted(n for n in os.listdir(directory) if n.endswith(suffix) and not n.startswith("."))


def _unpack(archive, target):
    """The archive's top-level .params and .json files, written into target (nothing else: no path from the
    archive is followed)."""
    try:
        os.makedirs(target, exist_ok=True)
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = os.path.basename(member.name)
                if member.isfile() and os.path.dirname(member.name).strip("./") == "" and \
                        name.endswith((".params", ".json")):
                    with tar.extractfile(member) as src, open(os.path.join(target, name), "wb") as dst:
                        while chunk := src.read(1 << 20):
                            dst.write(chunk)
    except (OSError, tarfile.TarError) as exc:
        raise ProgramError(f"cannot unpack fine-tuning weights {archive}: {exc}") from None
    return target


def _read_json(path):
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise ProgramError(f"cannot read {path} (beside the fine-tuning weights): {exc}") from None


def _from_directory(given, directory):
    description = os.path.join(directory, DESCRIPTION_FILE)
    if os.path.isfile(description):  # this image's model output
        info = _read_json(description)
        model = info.get("model") if isinstance(info, dict) else None
        if not isinstance(model, str):
            raise ProgramError(f"{description} does not name its model: is {given} this image's model output?")
        for tag in ("best", "final"):
            params = os.path.join(directory, f"{model}-{tag}.params")
            if os.path.isfile(params):
                return _from_file(given, params, model)
        raise ProgramError(f"fine-tuning weights not found: {given} has {DESCRIPTION_FILE} but neither "
                           f"{model}-best.params nor {model}-final.params")
    candidates = [n for n in _files(directory, ".params") if n != EXPORTED_PARAMS]
    if len(candidates) == 1:
        return _from_file(given, os.path.join(directory, candidates[0]))
    if not candidates:
        exported = os.path.isfile(os.path.join(directory, EXPORTED_PARAMS))
        exported = f" ({EXPORTED_PARAMS} is an exported network: fine-tune from the Gluon parameters " \
                   "<model>-best.params written beside it)" if exported else ""
        raise ProgramError(f"fine-tuning weights not found: no .params file in {given}{exported}")
    raise ProgramError(f"cannot tell which fine-tuning weights to use in {given}: {', '.join(candidates)}; pass "
                       "--finetune-from with the file's path")


def _from_file(given, params, model=None):
    if not params.endswith(".params") or not os.path.isfile(params):
        raise ProgramError(f"fine-tuning weights must be a .params file, a directory or a model.tar.gz: {given}")
    if os.path.basename(params) == EXPORTED_PARAMS:
        raise ProgramError(f"fine-tuning weights {params} are an exported network (names of its symbol): fine-tune "
                           "from the Gluon parameters <model>-best.params written beside it")
    directory = os.path.dirname(params)
    match = ZOO_FILE.fullmatch(os.path.basename(params))
    model = model or (match.group(1) if match else None)
    for name, key in ((DESCRIPTION_FILE, "classes"), (CLASSES_FILE, None)):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            found = _read_json(path)
            found = found.get(key) if key and isinstance(found, dict) else found
            names = [c.get("name") if isinstance(c, dict) else c for c in found] if isinstance(found, list) else None
            if not names or not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
                raise ProgramError(f"{path} does not list unique class names: {CLASSES_BESIDE}")
            return Source(given, params, tuple(names), path, model)
    return Source(given, params, None, None, model)


def reuse_map(classes, source_classes):
    """{index in classes: index in source_classes} of every class both lists name (GluonCV's reset_class with
    reuse_weights=<those names>)."""
    return {new: source_classes.index(name) for new, name in enumerate(classes) if name in source_classes}


def start_from(mx, net, source, classes, class_rows):
    """Sets `net` (built for `classes`, every parameter initialised) from the source's weights by GluonCV's rule.
    class_rows: {parameter name prefix: (leading rows, rows per class)} of the class-specific parameters (the class
    predictor's background row leads). Returns (source classes, {new index: source index} of the reused classes)."""
    try:
        loaded = mx.nd.load(source.params)
    except mx.base.MXNetError as exc:
        raise ProgramError(f"cannot read fine-tuning weights {source.params} as MXNet parameters: "
                           f"{str(exc).strip().splitlines()[0]}") from None
    if not isinstance(loaded, dict) or not loaded or not any("." in name for name in loaded):
        raise ProgramError(f"fine-tuning weights {source.params} hold no Gluon block parameters (net.save_parameters "
                           "writes them; an older save_params file names them by prefix: load it into the network "
                           "and save it with save_parameters)")
    params = net._collect_params_with_prefix()  # the names save_parameters writes (no public accessor)
    per_class = {name: rows for name, p in params.items() for prefix, rows in class_rows.items()
                 if name.startswith(prefix + ".")}
    source_classes = _source_classes(source, loaded, class_rows)
    _check_architecture(source, loaded, params, per_class, len(source_classes), len(classes))
    mapping = reuse_map(list(classes), list(source_classes))
    for name, param in params.items():
        if NOT_LEARNED.search(name):
            continue
        value = loaded[name]
        if name in per_class:
            lead, size = per_class[name]
            value = _class_rows(param.data().copyto(mx.cpu()), value, mapping, lead, size)
        param.set_data(value)
    return source_classes, mapping


def _class_rows(fresh, value, mapping, lead, size):
    """`fresh` with each reused class's rows (and the leading rows, when any class is reused) from `value`."""
    for new, old in mapping.items():
        fresh[(lead + new) * size:(lead + new + 1) * size] = value[(lead + old) * size:(lead + old + 1) * size]
    if mapping and lead:
        fresh[0:lead * size] = value[0:lead * size]
    return fresh


def _source_classes(source, loaded, class_rows):
    prefix = next(iter(class_rows))
    lead, size = class_rows[prefix]
    weight = loaded.get(f"{prefix}.weight")
    count = weight.shape[0] // size - lead if weight is not None else None
    if source.classes is not None:
        return source.classes
    if count == len(COCO_CLASS_NAMES):
        return tuple(COCO_CLASS_NAMES)  # GluonCV's COCO detectors
    raise ProgramError(f"cannot tell the classes of the fine-tuning weights {source.params} ({count} classes, not "
                       f"COCO's 80): {CLASSES_BESIDE}")


def _check_architecture(source, loaded, params, per_class, source_count, count):
    """Every learned parameter of the network is in the file with its shape (class-specific ones with the source's
    class count), and the file holds nothing else the network lacks."""
    what = f"fine-tuning weights {source.params}"
    learned = {name for name in params if not NOT_LEARNED.search(name)}
    missing = sorted(learned - set(loaded))
    extra = sorted(name for name in set(loaded) - set(params) if not NOT_LEARNED.search(name))
    if missing or extra:
        detail = (f"lack {len(missing)} of the network's parameters (e.g. {missing[0]!r})" if missing else
                  f"hold {len(extra)} parameters the network lacks (e.g. {extra[0]!r})")
        raise ProgramError(f"{what} are not of this job's architecture: they {detail}; fine-tune from a detector of "
                           "the same model, --network and --use-fpn")
    for name in sorted(learned):
        expected = tuple(params[name].shape)
        if name in per_class:
            lead, size = per_class[name]
            expected = ((lead + source_count) * size,) + expected[1:]
            assert params[name].shape[0] == (lead + count) * size, (name, params[name].shape, count)
        if tuple(loaded[name].shape) != expected:
            raise ProgramError(f"{what} do not fit this job's network: {name!r} has shape {tuple(loaded[name].shape)}, "
                               f"the network (with the weights' {source_count} classes) {expected}")

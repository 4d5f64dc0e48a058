"""The R-CNN programs' input: COCO-layout channels found and checked with the standard library, before
MXNet is imported, so that a bad channel fails in well under a second on every rank.

Layout: ``<channel>/annotations/instances_<split>.json`` and ``<channel>/<split>/<file_name>``. The train
data is the `train` channel (its split autodetected) or the walkthrough's `data` channel (train2017 and
val2017); validation data is the `val` channel, else a val* split next to the train split, else none.

Categories: any K >= 1, with any unique ids and unique names; the classes are the train annotation file's categories
in its order (class i is its i-th category). The validation file must list the same categories (ids and names; its
order does not matter: the train file's rules).
"""

import json
import os
import re

from sagemaker_mxnet_data.coco_categories import COCO_CLASS_NAMES

from mxnet_programs import channel_sharding
from mxnet_programs.process import ProgramError
from mxnet_programs.rcnn.cli import DATA_CHANNEL, DATA_TRAIN_SPLIT, DATA_VAL_SPLIT

DEFAULT_TRAIN_SPLIT_PREFIX = "train"
DEFAULT_VAL_SPLIT_PREFIX = "val"


class ChannelData:
    """One split of a COCO-layout channel, parsed and checked."""

    def __init__(self, channel, directory, split, annotation_file, image_dir, data, usable_images, categories):
        self.channel, self.directory, self.split = channel, directory, split
        self.annotation_file, self.image_dir, self.data = annotation_file, image_dir, data
        self.usable_images = usable_images
        self.categories = categories  # [(id, name)] in the file's order

    @property
    def num_images(self):
        return len(self.data["images"])

    @property
    def class_names(self):
        return [name for _, name in self.categories]

    @property
    def category_ids(self):
        return [cid for cid, _ in self.categories]

    def describe(self):
        return (f"{self.channel}: {self.annotation_file} ({self.num_images} images, {self.usable_images} with "
                f"usable objects, {len(self.data['annotations'])} annotations)")


def annotation_splits(directory):
    """{split: annotation file} for annotations/instances_<split>.json in a channel dir."""
    ann_dir = os.path.join(directory, "annotations")
    found = {}
    try:
        names = sorted(os.listdir(ann_dir))
    except (FileNotFoundError, NotADirectoryError):
        return found
    for name in names:
        m = re.fullmatch(r"instances_(.+)\.json", name)
        if m and os.path.isfile(os.path.join(ann_dir, name)):
            found[m.group(1)] = os.path.join(ann_dir, name)
    return found


def choose_split(channel, directory, requested, prefix):
    """The split to use in a channel: the requested one, else the only one, else the one named prefix*."""
    splits = annotation_splits(directory)
    if requested:
        path = os.path.join(directory, "annotations", f"instances_{requested}.json")
        if not os.path.isfile(path):
            raise ProgramError(f"missing annotation file for {channel} split '{requested}': {path}")
        return requested, path
    if not splits:
        raise ProgramError(
            f"missing annotation file: no annotations/instances_<split>.json in {channel} channel {directory} "
            f"(expected e.g. {os.path.join(directory, 'annotations', f'instances_{prefix}2017.json')})")
    if len(splits) == 1:
        return next(iter(splits.items()))
    matching = {s: p for s, p in splits.items() if s.startswith(prefix)}
    if len(matching) == 1:
        return next(iter(matching.items()))
    raise ProgramError(
        f"cannot tell which split to use in {channel} channel {directory}: found {', '.join(sorted(splits))}; "
        f"pass --{channel}-split")


def _read_annotations(annotation_file):
    try:
        with open(annotation_file, "rb") as f:
            data = json.load(f)
    except OSError as exc:
        raise ProgramError(f"cannot read annotation file {annotation_file}: {exc}") from None
    except ValueError as exc:
        raise ProgramError(f"annotation file is not valid JSON: {annotation_file}: {exc}") from None
    if not isinstance(data, dict):
        raise ProgramError(f"annotation file must hold a JSON object: {annotation_file}")
    for key in ("images", "annotations", "categories"):
        if not isinstance(data.get(key), list):
            raise ProgramError(f"annotation file has no '{key}' list: {annotation_file}")
    return data


def _check_categories(categories, annotation_file):
    """[(id, name)] in the file's order: at least one category, each an integer id and a non-empty name, ids and
    names unique (the classes are matched by name when fine-tuning, and results map back by id)."""
    if not categories:
        raise ProgramError(f"no categories in {annotation_file}: list at least one in 'categories'")
    found = []
    for c in categories:
        cid, name = (c.get("id"), c.get("name")) if isinstance(c, dict) else (None, None)
        if not isinstance(cid, int) or isinstance(cid, bool) or not isinstance(name, str) or not name.strip():
            raise ProgramError(f"category without an integer id and a name in {annotation_file}: {str(c)[:200]}")
        found.append((cid, name))
    for position, what in ((0, "ids"), (1, "names")):
        values = [c[position] for c in found]
        repeated = sorted({repr(v) for v in values if values.count(v) > 1})
        if repeated:
            raise ProgramError(f"duplicate category {what} in {annotation_file}: {', '.join(repeated)}")
    return found


def _describe_categories(categories, most=12):
    if not categories:
        return "none"
    shown = ", ".join(f"{name!r} (id {cid})" for cid, name in categories[:most])
    return shown + (f" and {len(categories) - most} more" if len(categories) > most else "")


def describe_classes(train):
    """The start log's line on the classes the network learns."""
    if train.class_names == COCO_CLASS_NAMES:
        return f"80 classes, COCO's 80 categories in COCO's order: {_describe_categories(train.categories, most=3)}"
    return (f"{len(train.categories)} classes, the train annotation file's categories in its order: "
            f"{_describe_categories(train.categories, most=len(train.categories))}")


def check_same_categories(train, val):
    """The validation file must list the train file's categories (the same ids with the same names): the network
    predicts the train file's classes, and validation maps them back to ids."""
    if val is None or set(train.categories) == set(val.categories):
        return
    only_train = [c for c in train.categories if c not in val.categories]
    only_val = [c for c in val.categories if c not in train.categories]
    raise ProgramError(
        f"the train and val annotation files list different categories: train {train.annotation_file} "
        f"({len(train.categories)} categories), val {val.annotation_file} ({len(val.categories)}); only in train: "
        f"{_describe_categories(only_train)}; only in val: {_describe_categories(only_val)}: give both files the "
        "same categories")


def _check_images(images_list, image_dir, annotation_file):
    """{image id: entry}; every listed image must exist."""
    images = {}
    missing = []
    for entry in images_list:
        if not isinstance(entry, dict) or not all(k in entry for k in ("id", "file_name", "width", "height")):
            raise ProgramError(f"image entry without id/file_name/width/height in {annotation_file}: "
                               f"{str(entry)[:200]}")
        if entry["id"] in images:
            raise ProgramError(f"duplicate image id {entry['id']} in {annotation_file}")
        images[entry["id"]] = entry
        path = os.path.join(image_dir, entry["file_name"])
        if not os.path.isfile(path):
            missing.append(path)
    if missing:
        raise ProgramError(
            f"image referenced but absent: {missing[0]} ({len(missing)} of {len(images)} images listed in "
            f"{annotation_file} are missing under {image_dir})")
    return images


def load_channel(model, channel, directory, split, annotation_file, require_usable):
    """Parses and checks one split: categories, image files, annotation sanity, usable image count."""
    data = _read_annotations(annotation_file)
    categories = _check_categories(data["categories"], annotation_file)
    cat_ids = {cid for cid, _ in categories}
    image_dir = os.path.join(directory, split)
    images = _check_images(data["images"], image_dir, annotation_file)
    usable = set()
    for ann in data["annotations"]:
        if not isinstance(ann, dict) or not all(k in ann for k in ("image_id", "category_id", "bbox")):
            raise ProgramError(f"annotation without image_id/category_id/bbox in {annotation_file}: "
                               f"{str(ann)[:200]}")
        entry = images.get(ann["image_id"])
        if entry is None:
            raise ProgramError(f"annotation {ann.get('id')} refers to unknown image id {ann['image_id']} "
                               f"in {annotation_file}")
        if ann["category_id"] not in cat_ids:
            raise ProgramError(f"annotation {ann.get('id')} has unknown category id {ann['category_id']} "
                               f"in {annotation_file}")
        bbox = ann["bbox"]
        if not (isinstance(bbox, list) and len(bbox) == 4 and all(isinstance(v, (int, float)) for v in bbox)):
            raise ProgramError(f"annotation {ann.get('id')} has a malformed bbox {bbox!r} in {annotation_file}")
        if ann.get("ignore", 0) == 1:
            continue
        model.check_annotation(ann, annotation_file)
        if model.usable(ann, entry):
            usable.add(ann["image_id"])
    if require_usable and not usable:
        raise ProgramError(
            f"empty {channel} set: none of the {len(images)} images in {annotation_file} has a usable object "
            f"annotation ({model.usable_objects})")
    if not images:
        raise ProgramError(f"empty {channel} set: no images in {annotation_file}")
    return ChannelData(channel, directory, split, annotation_file, image_dir, data, len(usable), categories)


def check_data_channel_layout(directory, train_split, val_split):
    """The `data` channel must hold COCO's layout for the splits the job uses (val_split None: the val
    channel validates instead); the first missing path is an error naming the channel and the path."""
    if not os.path.isdir(directory):
        raise ProgramError(f"missing {DATA_CHANNEL} channel: directory {directory} does not exist")
    needed = []
    for split in filter(None, (train_split, val_split)):
        needed += [(os.path.join(directory, "annotations", f"instances_{split}.json"), os.path.isfile),
                   (os.path.join(directory, split), os.path.isdir)]
    for path, exists in needed:
        if not exists(path):
            layout = ", ".join(os.path.relpath(p, directory) + ("/" if check is os.path.isdir else "")
                               for p, check in needed)
            raise ProgramError(f"channel '{DATA_CHANNEL}' is incomplete: missing {path} (it must hold COCO's "
                               f"layout: {layout})")


def _split_file(directory, split):
    return os.path.join(directory, "annotations", f"instances_{split}.json")


def _load_data_channel(model, config):
    """(train, val) from the walkthrough's `data` channel: train2017 trains, val2017 validates (--train-split
    and --val-split rename them; a `val` channel, when given, validates instead)."""
    train_split = config.train_split or DATA_TRAIN_SPLIT
    val_split = None if config.val_dir_explicit else (config.val_split or DATA_VAL_SPLIT)
    check_data_channel_layout(config.train_dir, train_split, val_split)
    train = load_channel(model, "train", config.train_dir, train_split, _split_file(config.train_dir, train_split),
                         require_usable=True)
    if val_split is None:
        return train, _load_val_channel(model, config)
    return train, load_channel(model, "val", config.train_dir, val_split, _split_file(config.train_dir, val_split),
                               require_usable=False)


def _load_val_channel(model, config):
    if not os.path.isdir(config.val_dir):
        raise ProgramError(f"missing val channel: directory {config.val_dir} does not exist")
    split, path = choose_split("val", config.val_dir, config.val_split, DEFAULT_VAL_SPLIT_PREFIX)
    return load_channel(model, "val", config.val_dir, split, path, require_usable=False)


def load_inputs(model, config):
    """(train ChannelData, val ChannelData or None) for the config's channels (see the module docstring), their
    categories the same."""
    train, val = _load_train_and_val(model, config)
    check_same_categories(train, val)
    return train, val


def _load_train_and_val(model, config):
    if config.train_channel == DATA_CHANNEL:
        return _load_data_channel(model, config)
    if not os.path.isdir(config.train_dir):
        raise ProgramError(f"missing train channel: directory {config.train_dir} does not exist")
    split, path = choose_split("train", config.train_dir, config.train_split, DEFAULT_TRAIN_SPLIT_PREFIX)
    train = load_channel(model, "train", config.train_dir, split, path, require_usable=True)
    if config.val_dir_explicit:
        return train, _load_val_channel(model, config)
    if config.val_split:
        path = _split_file(config.train_dir, config.val_split)
        if not os.path.isfile(path):
            raise ProgramError(f"missing annotation file for val split '{config.val_split}': {path}")
        return train, load_channel(model, "val", config.train_dir, config.val_split, path, require_usable=False)
    candidates = {s: p for s, p in annotation_splits(config.train_dir).items()
                  if s != split and s.startswith(DEFAULT_VAL_SPLIT_PREFIX)}
    if len(candidates) == 1:
        (val_split, path), = candidates.items()
        return train, load_channel(model, "val", config.train_dir, val_split, path, require_usable=False)
    return train, None


def train_shard(config, env, val, data_config):
    """This rank's channel_sharding.Shard of the training data. Validation is scored on rank 0 against the
    whole validation set's annotations, so a val set from a ShardedByS3Key channel (a part per host) is an
    error rather than a silently partial mAP."""
    shard = channel_sharding.shard_for(data_config, config.train_channel, env)
    val_channel = "val" if config.val_dir_explicit else config.train_channel
    if val is not None and \
            channel_sharding.s3_distribution(data_config, val_channel) == channel_sharding.SHARDED_BY_S3_KEY:
        fix = "give it as a FullyReplicated 'val' channel" if val_channel != "val" else "make it FullyReplicated"
        raise ProgramError(
            f"the validation data comes from channel '{val_channel}', which is ShardedByS3Key (each host holds a "
            f"part), but COCO mAP is computed on rank 0 over the whole validation set: {fix}")
    return shard

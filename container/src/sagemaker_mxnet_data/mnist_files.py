"""MNIST data files, read and checked: one reader for the mnist program and `synth-data shard`.

numpy only (imported lazily), never mxnet. A channel directory may hold, in any mix:
  * MNIST IDX files, plain or gzip (train-images-idx3-ubyte, t10k-labels-idx1-ubyte.gz, ...), recognised by
    their magic numbers, not their names; image and label files pair up by name (a lone pair belongs
    together whatever the names say). A directory holding both the train-* and t10k-* pairs yields the pair
    of the requested role.
  * ``.npz`` with arrays ``data`` (N, 28, 28) / (N, 784) / (N, 1, 28, 28) and ``labels`` (N,) (also
    accepted: x/y, x_train/y_train or x_test/y_test, images/labels, image/label);
  * RecordIO files: per record ``mx.recordio.pack(IRHeader(0, label, id, 0), 784 raw uint8 pixels)``.
All recognised files are read in name order and concatenated.
"""

import gzip
import os
import struct
import zipfile

from sagemaker_mxnet_data import recordio

NUM_CLASSES = 10
IMAGE_SIDE = 28
IMAGE_BYTES = IMAGE_SIDE * IMAGE_SIDE
IDX_IMAGES_MAGIC = 0x00000803  # unsigned byte, 3 dimensions
IDX_LABELS_MAGIC = 0x00000801  # unsigned byte, 1 dimension
ROLES = ("train", "test")
_NPZ_COMMON_KEYS = [("x", "y"), ("images", "labels"), ("image", "label")]
_NPZ_KEY_PAIRS = {  # (images, labels) array names per role, first match wins
    "train": [("data", "labels"), ("x_train", "y_train"), *_NPZ_COMMON_KEYS],
    "test": [("data", "labels"), ("x_test", "y_test"), *_NPZ_COMMON_KEYS],
}


class MnistFileError(ValueError):
    """A file or directory that does not hold readable MNIST data; the message names it."""


def _np():
    import numpy

    return numpy


def _peek(path, size=8):
    """First bytes of a file's content (decompressed if gzip) and whether it is gzip."""
    with open(path, "rb") as f:
        head = f.read(size)
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as f:
                return f.read(size), True
        except (OSError, EOFError) as exc:
            raise MnistFileError(f"corrupt gzip file {path}: {exc}") from None
    return head, False


def classify_file(path):
    """'idx-images', 'idx-labels', 'npz', 'recordio' or None (unrecognised), by content."""
    head, _ = _peek(path)
    if len(head) >= 4:
        magic = struct.unpack(">I", head[:4])[0]
        if magic == IDX_IMAGES_MAGIC:
            return "idx-images"
        if magic == IDX_LABELS_MAGIC:
            return "idx-labels"
        if head[:4] == b"PK\x03\x04":
            return "npz"
        if head[:4] == recordio.MAGIC_BYTES:
            return "recordio"
    return None


def _pair_key(name):
    base = name.lower().removesuffix(".gz")
    for a, b in (("images", "*"), ("labels", "*"), ("image", "*"), ("label", "*"), ("idx3", "idx"),
                 ("idx1", "idx")):
        base = base.replace(a, b)
    return base


def _role_matches(path, role):
    name = os.path.basename(path).lower()
    return name.startswith("train") if role == "train" else name.startswith(("t10k", "test"))


def _list_files(directory):
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
    return found


def read_directory(directory, channel, role, warn=None):
    """Every recognised file of a channel dir: (images (N, 28, 28) uint8 or float, labels (N,) int64).

    `role` ("train" or "test") picks the pair of a directory holding both standard pairs and the .npz
    array names. `warn(message)` hears about unrecognised files, which are skipped.
    """
    np = _np()
    if not os.path.isdir(directory):
        raise MnistFileError(f"missing channel '{channel}': directory {directory} does not exist")
    files = _list_files(directory)
    if not files:
        raise MnistFileError(f"channel '{channel}' is empty: no files in {directory}")
    kinds = {path: classify_file(path) for path in files}
    if not any(kinds.values()):
        listing = ", ".join(os.path.relpath(p, directory) for p in files[:5])
        listing += " ..." if len(files) > 5 else ""
        raise MnistFileError(
            f"unrecognised data format in channel '{channel}' ({directory}): expected MNIST IDX files "
            f"(plain or .gz), .npz with 'data'/'labels' arrays, or RecordIO; found {listing}")
    for path, kind in kinds.items():
        if not kind and warn is not None:
            warn(f"ignoring unrecognised file {path}")

    parts = [_read_idx_pair(images, labels) for images, labels in _idx_pairs(kinds, channel, role)]
    parts += [_read_npz(path, role) for path in sorted(p for p, k in kinds.items() if k == "npz")]
    for path in sorted(p for p, k in kinds.items() if k == "recordio"):
        with open(path, "rb") as f:
            parts.append(read_recordio(f, path))
    if sum(len(labels) for _, labels in parts) == 0:
        raise MnistFileError(f"channel '{channel}' is empty: 0 samples in {directory}")
    if len(parts) == 1:
        return parts[0]
    if all(images.dtype == np.uint8 for images, _ in parts):
        images = np.concatenate([images for images, _ in parts])
    else:
        images = np.concatenate([as_float(images) for images, _ in parts])
    return images, np.concatenate([labels for _, labels in parts])


def _idx_pairs(kinds, channel, role):
    images_files = {_pair_key(os.path.basename(p)): p for p, k in kinds.items() if k == "idx-images"}
    labels_files = {_pair_key(os.path.basename(p)): p for p, k in kinds.items() if k == "idx-labels"}
    if len(images_files) == 1 and len(labels_files) == 1:
        images_files = {"pair": next(iter(images_files.values()))}
        labels_files = {"pair": next(iter(labels_files.values()))}
    for key in sorted(set(images_files) ^ set(labels_files)):
        path = images_files.get(key) or labels_files.get(key)
        other = "labels" if key in images_files else "images"
        raise MnistFileError(f"IDX file {path} has no matching {other} file in channel '{channel}'")
    pairs = sorted((images_files[k], labels_files[k]) for k in images_files)
    if len(pairs) > 1 and any(_role_matches(i, role) for i, _ in pairs):
        # The stock MNIST download has train-* and t10k-* side by side: take the role's own.
        pairs = [pair for pair in pairs if _role_matches(pair[0], role)]
    return pairs


def _read_idx_pair(images_path, labels_path):
    images, labels = _read_idx(images_path, 3), _read_idx(labels_path, 1)
    _check_part(images, labels, f"{images_path} + {os.path.basename(labels_path)}")
    return images, labels.astype(_np().int64)


def _read_idx(path, ndim):
    np = _np()
    opener = gzip.open if _peek(path)[1] else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as exc:
        raise MnistFileError(f"cannot read {path}: {exc}") from None
    header = 4 + 4 * ndim
    if len(data) < header:
        raise MnistFileError(f"truncated IDX header in {path}")
    dims = struct.unpack(f">{ndim}I", data[4:header])
    expected = int(np.prod(dims, dtype=np.int64))
    if len(data) - header != expected:
        shape = "x".join(map(str, dims))
        raise MnistFileError(f"IDX file {path} is truncated or padded: header says {shape} "
                             f"({expected} bytes), file has {len(data) - header}")
    array = np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)
    if ndim == 3 and tuple(dims[1:]) != (IMAGE_SIDE, IMAGE_SIDE):
        raise MnistFileError(f"images in {path} are {dims[1]}x{dims[2]}, expected 28x28")
    return array


def _read_npz(path, role):
    np = _np()
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise MnistFileError(f"cannot read .npz {path}: {exc}") from None
    with npz:
        keys = set(npz.files)
        for images_key, labels_key in _NPZ_KEY_PAIRS[role]:
            if images_key in keys and labels_key in keys:
                images, labels = npz[images_key], npz[labels_key]
                break
        else:
            raise MnistFileError(f"unrecognised .npz layout in {path}: arrays {sorted(keys)}; expected "
                                 "'data' and 'labels'")
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise MnistFileError(f"labels in {path} must be one number per image, got shape {labels.shape}")
    images = np.asarray(images)
    if images.ndim >= 1 and len(images) != len(labels):
        raise MnistFileError(f"images/labels count mismatch in {path}: {len(images)} images, "
                             f"{len(labels)} labels")
    if images.size != len(labels) * IMAGE_BYTES:
        raise MnistFileError(f"images in {path} have shape {images.shape}, expected (N, 28, 28)")
    images = images.reshape(len(labels), IMAGE_SIDE, IMAGE_SIDE)
    if not np.issubdtype(labels.dtype, np.number) or (labels.size and not np.all(np.mod(labels, 1) == 0)):
        raise MnistFileError(f"labels in {path} must be integers 0..9, got dtype {labels.dtype}")
    _check_part(images, labels, path)
    return images, labels.astype(np.int64)


def read_recordio(stream, source):
    """Image records (IRHeader label + 784 raw pixels) from a RecordIO file or Pipe-mode FIFO."""
    np = _np()
    pixels, labels = bytearray(), []
    try:
        for index, record in enumerate(recordio.iter_records(stream)):
            label, payload = recordio.unpack_ir_record(record)
            if len(payload) != IMAGE_BYTES:
                raise MnistFileError(f"RecordIO record {index} in {source} has a {len(payload)}-byte image; "
                                     "expected 784 raw 28x28 uint8 pixels")
            pixels += payload
            labels.append(label)
    except recordio.RecordIOError as error:
        raise MnistFileError(f"{error}: {source}") from None
    images = np.frombuffer(bytes(pixels), dtype=np.uint8).reshape(-1, IMAGE_SIDE, IMAGE_SIDE)
    labels = np.asarray(labels, dtype=np.float64)
    if labels.size and not np.all(np.mod(labels, 1) == 0):
        raise MnistFileError(f"labels in {source} must be integers 0..9")
    _check_part(images, labels, source)
    return images, labels.astype(np.int64)


def _check_part(images, labels, source):
    np = _np()
    if len(images) != len(labels):
        raise MnistFileError(f"images/labels count mismatch in {source}: {len(images)} images, "
                             f"{len(labels)} labels")
    if len(labels):
        bad = labels[(labels < 0) | (labels >= NUM_CLASSES)]
        if bad.size:
            raise MnistFileError(f"labels out of range 0..9 in {source}: found {bad.size} "
                                 f"(e.g. {np.asarray(bad).flat[0]:g})")


def as_float(images):
    """float32 pixels in [0, 1]: uint8 is scaled; float data may already be in [0, 1], 0..255 floats are
    scaled like uint8."""
    np = _np()
    images = np.asarray(images)
    if images.dtype == np.uint8:
        return images.astype(np.float32) / 255.0
    images = images.astype(np.float32)
    if images.size and images.max() > 1.0:
        images /= 255.0
    return images


def as_uint8(images):
    """uint8 pixels (what the writers store) from uint8 or float images."""
    np = _np()
    images = np.asarray(images)
    if images.dtype == np.uint8:
        return images
    return np.clip(np.rint(as_float(images) * 255.0), 0, 255).astype(np.uint8)

"""`synth-data`: make small synthetic data sets and per-rank shards for the training entrypoints.

Runs anywhere with numpy (imported lazily); it never imports mxnet, so it works on a laptop, in CI
and inside the image alike. RecordIO is written by ``recordio.RecordIOWriter``, byte-compatible with
``mxnet.recordio.MXRecordIO`` (tests read it back with mxnet).

Subcommands::

    synth-data mnist OUT_DIR [--train 6000] [--test 1000] [--seed 0] [--format idx|idx.gz|npz|recordio]
        A learnable MNIST look-alike: 10 digit-like stroke templates rendered at 28x28 with random
        affine jitter, stroke width and noise. Writes OUT_DIR/train/ and OUT_DIR/test/ (one dir per
        SageMaker channel).

    synth-data shard IN_DIR OUT_DIR --shards N [--channel train] [--format recordio|idx|idx.gz|npz]
        Splits the data set in channel dir IN_DIR into N per-rank shards OUT_DIR/<channel>_0 ..
        OUT_DIR/<channel>_{N-1} (sample i goes to shard i % N), for per-rank S3 prefixes or
        Pipe-mode channels. recordio writes one file per shard.

File layouts written:
    idx / idx.gz  train/train-images-idx3-ubyte[.gz] + train/train-labels-idx1-ubyte[.gz],
                  test/t10k-images-idx3-ubyte[.gz] + test/t10k-labels-idx1-ubyte[.gz]
    npz           <channel>/<channel>.npz with arrays ``data`` (N, 28, 28) uint8, ``labels`` (N,) uint8
    recordio      <channel>/<channel>.rec: one record per image, payload = mx.recordio IRHeader
                  (flag=0, label=digit, id=index, id2=0; struct "IfQQ") + 784 raw uint8 pixels

Adding a subcommand: write ``_add_<name>_parser(subparsers)`` that registers its arguments and sets
``func``, and append it to ``SUBCOMMANDS``.

Exit codes: 0 ok, 2 bad arguments or unreadable input (one line ``synth-data: error: ...`` on stderr).
"""

import argparse
import gzip
import os
import struct
import sys

from sagemaker_mxnet_data import mnist_files
from sagemaker_mxnet_data.mnist_files import IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC, IMAGE_SIDE, NUM_CLASSES
from sagemaker_mxnet_data.recordio import RecordIOWriter, pack_ir_record

PROG = "synth-data"
FORMATS = ("idx", "idx.gz", "npz", "recordio")


class DataToolError(Exception):
    """A problem with the user's input: reported as one line on stderr, exit code 2."""


# --------------------------------------------------------------------------------------------
# Synthetic MNIST


def _arc(cx, cy, rx, ry, start_deg, end_deg, points=14):
    np = _np()
    angles = np.radians(np.linspace(start_deg, end_deg, points))
    return [(cx + rx * np.cos(a), cy + ry * np.sin(a)) for a in angles]


def _digit_strokes():
    """Polylines per digit in a unit box (x right, y down); angles in degrees, 90 = down."""
    return {
        0: [_arc(0.5, 0.5, 0.2, 0.32, 0, 360, 20)],
        1: [[(0.38, 0.3), (0.52, 0.16), (0.52, 0.84)]],
        2: [_arc(0.5, 0.34, 0.2, 0.18, 190, 380) + [(0.28, 0.84), (0.74, 0.84)]],
        3: [_arc(0.48, 0.32, 0.2, 0.16, 200, 450), _arc(0.48, 0.66, 0.22, 0.18, 270, 520)],
        4: [[(0.62, 0.84), (0.62, 0.16), (0.26, 0.62), (0.78, 0.62)]],
        5: [[(0.72, 0.16), (0.36, 0.16), (0.34, 0.47)] + _arc(0.5, 0.64, 0.22, 0.2, 225, 500)],
        6: [[(0.66, 0.16), (0.46, 0.3), (0.34, 0.48), (0.3, 0.66)], _arc(0.5, 0.66, 0.2, 0.18, 0, 360)],
        7: [[(0.26, 0.16), (0.74, 0.16), (0.42, 0.84)]],
        8: [_arc(0.5, 0.32, 0.17, 0.16, 0, 360), _arc(0.5, 0.66, 0.21, 0.18, 0, 360)],
        9: [_arc(0.5, 0.34, 0.2, 0.18, 0, 360), [(0.7, 0.34), (0.66, 0.84)]],
    }


def _template_segments():
    """Per digit: an (S, 2, 2) array of line segments (start, end) in unit coordinates."""
    np = _np()
    segments = {}
    for digit, polylines in _digit_strokes().items():
        parts = []
        for line in polylines:
            pts = np.asarray(line, dtype=np.float64)
            parts.append(np.stack([pts[:-1], pts[1:]], axis=1))
        segments[digit] = np.concatenate(parts)
    return segments


def render_digits(labels, rng, chunk=128):
    """Renders one 28x28 uint8 image per label with random pose, stroke width and noise."""
    np = _np()
    labels = np.asarray(labels)
    templates = _template_segments()
    side = IMAGE_SIDE
    yy, xx = np.mgrid[0:side, 0:side]
    pixels = np.stack([xx.ravel() + 0.5, yy.ravel() + 0.5], axis=1).astype(np.float32)  # centres, (784, 2)
    images = np.empty((len(labels), side, side), dtype=np.uint8)
    # Vectorised over chunks of same-digit samples (same segment count); per-sample draws stay
    # in a fixed order so a seed always gives the same bytes.
    for digit in range(NUM_CLASSES):
        where = np.flatnonzero(labels == digit)
        for lo in range(0, len(where), chunk):
            idx = where[lo:lo + chunk]
            images[idx] = _render_chunk(templates[digit], len(idx), pixels, rng)
    return images


def _render_chunk(template, count, pixels, rng):
    np = _np()
    side = IMAGE_SIDE
    angle = np.radians(rng.uniform(-14, 14, size=count))
    shear = rng.uniform(-0.25, 0.25, size=count)
    sx, sy = rng.uniform(0.78, 1.08, size=(2, count))
    cos, sin = np.cos(angle), np.sin(angle)
    # affine = rotation @ [[sx, shear], [0, sy]], one 2x2 per sample
    affine = np.empty((count, 2, 2))
    affine[:, 0, 0], affine[:, 0, 1] = cos * sx, cos * shear - sin * sy
    affine[:, 1, 0], affine[:, 1, 1] = sin * sx, sin * shear + cos * sy
    seg = template - 0.5  # centre the box so rotation/scale keep the digit in frame
    seg = np.einsum("spk,nck->nspc", seg, affine) + rng.normal(0.0, 0.018, size=(count, *seg.shape))
    seg = (seg + 0.5 + rng.uniform(-0.1, 0.1, size=(count, 1, 1, 2))) * side
    seg = seg.astype(np.float32)  # float32 halves the memory traffic of the (n, P, S) arrays below
    x0, y0 = seg[:, None, :, 0, 0], seg[:, None, :, 0, 1]  # (n, 1, S)
    dx, dy = seg[:, None, :, 1, 0] - x0, seg[:, None, :, 1, 1] - y0
    inv_len_sq = 1.0 / np.maximum(dx * dx + dy * dy, 1e-6)
    # Distance from every pixel centre to every segment: project, clamp to the segment, measure.
    rx, ry = pixels[None, :, None, 0] - x0, pixels[None, :, None, 1] - y0  # (n, P, S)
    t = np.clip((rx * dx + ry * dy) * inv_len_sq, 0.0, 1.0)
    rx -= t * dx
    ry -= t * dy
    dist_sq = (rx * rx + ry * ry).min(axis=2)  # (n, P)
    half_width = rng.uniform(0.7, 1.6, size=(count, 1))
    ink = np.clip(half_width + 0.5 - np.sqrt(dist_sq), 0.0, 1.0) * rng.uniform(0.7, 1.0, size=(count, 1))
    ink = ink + rng.normal(0.0, 0.06, size=ink.shape)
    return np.clip(ink * 255.0, 0, 255).astype(np.uint8).reshape(count, side, side)


def make_mnist(num_samples, seed):
    """Balanced-ish random labels and their rendered images."""
    np = _np()
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, size=num_samples).astype(np.uint8)
    return render_digits(labels, rng), labels


# --------------------------------------------------------------------------------------------
# Writers and readers


def write_dataset(images, labels, channel_dir, channel, fmt):
    """Writes one channel's data in `fmt`; returns the paths written."""
    np = _np()
    os.makedirs(channel_dir, exist_ok=True)
    images = np.ascontiguousarray(images, dtype=np.uint8)
    labels = np.ascontiguousarray(labels, dtype=np.uint8)
    if fmt in ("idx", "idx.gz"):
        # The standard MNIST names: train-* for training, t10k-* for everything else.
        stem = "train" if channel.startswith("train") else "t10k"
        suffix = ".gz" if fmt == "idx.gz" else ""
        images_path = os.path.join(channel_dir, f"{stem}-images-idx3-ubyte{suffix}")
        labels_path = os.path.join(channel_dir, f"{stem}-labels-idx1-ubyte{suffix}")
        count = len(labels)
        _write_file(images_path, struct.pack(">IIII", IDX_IMAGES_MAGIC, count, *images.shape[1:3])
                    + images.tobytes(), gz=bool(suffix))
        _write_file(labels_path, struct.pack(">II", IDX_LABELS_MAGIC, count) + labels.tobytes(),
                    gz=bool(suffix))
        return [images_path, labels_path]
    if fmt == "npz":
        path = os.path.join(channel_dir, f"{channel}.npz")
        tmp = path + ".tmp.npz"
        np.savez_compressed(tmp, data=images, labels=labels)
        os.replace(tmp, path)
        return [path]
    if fmt == "recordio":
        path = os.path.join(channel_dir, f"{channel}.rec")
        tmp = path + ".tmp"
        with open(tmp, "wb") as out:
            writer = RecordIOWriter(out)
            for index in range(len(labels)):
                writer.write(pack_ir_record(int(labels[index]), index, images[index].tobytes()))
        os.replace(tmp, path)
        return [path]
    raise DataToolError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")


def _write_file(path, data, gz):
    tmp = path + ".tmp"
    # mtime=0 keeps .gz output byte-identical across runs with the same seed.
    with (gzip.GzipFile(tmp, "wb", mtime=0) if gz else open(tmp, "wb")) as out:
        out.write(data)
    os.replace(tmp, path)


def read_dataset(channel_dir, role="train"):
    """Every IDX (plain/.gz), .npz and RecordIO file in a channel dir, read by the mnist program's own reader
    (mnist_files). Returns (images (N, 28, 28) uint8, labels (N,) uint8)."""
    if not os.path.isdir(channel_dir):
        raise DataToolError(f"input dir does not exist: {channel_dir}")
    try:
        images, labels = mnist_files.read_directory(channel_dir, os.path.basename(channel_dir), role)
    except mnist_files.MnistFileError as exc:
        raise DataToolError(str(exc)) from None
    return mnist_files.as_uint8(images), labels.astype(_np().uint8)


# --------------------------------------------------------------------------------------------
# Subcommands


def _cmd_mnist(args):
    if args.train < 1 or args.test < 1:
        raise DataToolError("--train and --test must be at least 1")
    # Different seeds per split, so test images are never copies of training images.
    for channel, count, seed_offset in (("train", args.train, 0), ("test", args.test, 1)):
        images, labels = make_mnist(count, [args.seed, seed_offset])
        paths = write_dataset(images, labels, os.path.join(args.out_dir, channel), channel, args.format)
        print(f"{PROG}: wrote {count} {channel} samples: {', '.join(paths)}")
    return 0


def _cmd_shard(args):
    if args.shards < 1:
        raise DataToolError(f"--shards must be at least 1, got {args.shards}")
    images, labels = read_dataset(args.in_dir, role="train" if args.channel.startswith("train") else "test")
    if len(labels) < args.shards:
        raise DataToolError(f"{len(labels)} samples cannot fill {args.shards} shards")
    for shard in range(args.shards):
        channel = f"{args.channel}_{shard}"
        # Same rule as the entrypoint's in-channel sharding (rank r takes samples r::N).
        paths = write_dataset(images[shard::args.shards], labels[shard::args.shards],
                              os.path.join(args.out_dir, channel), channel, args.format)
        print(f"{PROG}: wrote {len(labels[shard::args.shards])} samples to {', '.join(paths)}")
    return 0


def _add_mnist_parser(subparsers):
    p = subparsers.add_parser("mnist", help="synthetic, learnable MNIST-format data (train/ and test/)",
                              formatter_class=_HelpFormatter)
    p.add_argument("out_dir", metavar="OUT_DIR", help="writes OUT_DIR/train/ and OUT_DIR/test/")
    p.add_argument("--train", type=int, default=6000, help="number of training samples")
    p.add_argument("--test", type=int, default=1000, help="number of test samples")
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    p.add_argument("--format", choices=FORMATS, default="idx", help="file format")
    p.set_defaults(func=_cmd_mnist)


def _add_shard_parser(subparsers):
    p = subparsers.add_parser("shard", help="split a channel's data into N per-rank shards",
                              formatter_class=_HelpFormatter)
    p.add_argument("in_dir", metavar="IN_DIR", help="a channel dir (IDX, .npz or RecordIO files)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="writes OUT_DIR/<channel>_0 .. <channel>_{N-1}")
    p.add_argument("--shards", type=int, required=True, help="number of shards (= number of ranks)")
    p.add_argument("--channel", default="train", help="channel name prefix of the shard dirs")
    p.add_argument("--format", choices=FORMATS, default="recordio",
                   help="shard file format (recordio for Pipe mode)")
    p.set_defaults(func=_cmd_shard)


# One registration function per subcommand; append new ones here.
def _add_coco_parser(subparsers):
    from sagemaker_mxnet_data import synthetic_coco  # numpy + Pillow only; R-CNN smoke-test data

    synthetic_coco.add_subcommand(subparsers)


SUBCOMMANDS = [_add_mnist_parser, _add_shard_parser, _add_coco_parser]


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """"(default: X)" except where there is no default (required options)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


class _OneLineErrorParser(argparse.ArgumentParser):
    def error(self, message):
        print(f"{PROG}: error: {message}", file=sys.stderr)
        sys.exit(2)


def build_parser():
    parser = _OneLineErrorParser(prog=PROG, description="Make synthetic data sets and per-rank shards.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_OneLineErrorParser)
    subparsers.required = True
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except DataToolError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


def _np():
    # Lazy so `synth-data --help` works and is fast without numpy.
    try:
        import numpy
    except ImportError:
        raise DataToolError("numpy is required (pip install numpy)") from None
    return numpy


if __name__ == "__main__":
    sys.exit(main())

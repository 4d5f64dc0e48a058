"""Files written so that no reader (a resuming job, SageMaker's S3 upload of /opt/ml/checkpoints or
/opt/ml/model) ever sees half of one: temp file in the same directory, fsync, os.replace."""

import errno
import json
import os
import shutil
import tempfile

DISK_FULL_BYTES = 1 << 20  # a failed save with less free than this is reported as a full disk


def atomic_write(path, write_fn, mode="wb"):
    """Calls write_fn(file) on a temp file in the same dir, fsyncs, then os.replace()s it to `path`.

    Readers (a resuming job, SageMaker's S3 upload of /opt/ml/checkpoints) never see half a file.
    """

    def save(filename):
        with open(filename, mode) as f:
            write_fn(f)

    atomic_save(path, save)


def atomic_save(path, save_to_filename):
    """Like atomic_write for APIs that insist on a file name (net.save_parameters, trainer.save_states)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(path) + ".", dir=directory)
    os.close(fd)
    try:
        save_to_filename(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        disk_full = _disk_full_error(path, error)
        remove_quietly(tmp)
        if disk_full:
            raise disk_full from error
        raise


def _disk_full_error(path, error):
    """A clear OSError(ENOSPC) when a save failed on a full filesystem, else None. MXNet reports a full
    disk as "FileStream.Write incomplete"; this says what happened and where. Checked before the partial
    temp file is removed, while the filesystem is still as full as the write found it."""
    if not isinstance(error, Exception) or "while saving" in str(error):
        return None
    enospc = isinstance(error, OSError) and error.errno == errno.ENOSPC
    try:
        stat = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        stat = None
    free = stat.f_bavail * stat.f_frsize if stat else None
    if not enospc and (free is None or free >= DISK_FULL_BYTES):
        return None
    room = f" ({free // 1024} KiB free of {stat.f_blocks * stat.f_frsize // 1024} KiB)" if stat else ""
    return OSError(errno.ENOSPC, f"No space left on device while saving {path}{room}")


def atomic_write_json(path, obj):
    atomic_write(path, lambda f: f.write((json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()))


def export_hybrid_block(net, model_dir, name="model", epoch=0):
    """net.export() into model_dir atomically: <name>-symbol.json + <name>-NNNN.params.

    Exported into a staging dir inside model_dir (same filesystem), then each file is os.replace()d
    into place, params first, so a reader never finds a symbol file without its parameters.
    The block must be hybridized and have run forward once. Returns the two paths.
    """
    os.makedirs(model_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".export-", dir=model_dir)
    try:
        net.export(os.path.join(staging, name), epoch=epoch)
        paths = []
        for filename in (f"{name}-{epoch:04d}.params", f"{name}-symbol.json"):
            target = os.path.join(model_dir, filename)
            os.replace(os.path.join(staging, filename), target)
            paths.append(target)
        return paths
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_quietly(path):
    try:
        os.remove(path)
    except OSError:
        pass

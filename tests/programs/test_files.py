"""files: atomic writes that never leave half a file, and a full disk named as such."""

import errno
import json
import os

import pytest
from mxnet_programs import files


class _Room:
    """os.statvfs's answer for a filesystem with `free` bytes left."""

    def __init__(self, free):
        self.f_frsize, self.f_bavail, self.f_blocks = 1024, free // 1024, 8192


def _failing_save(filename):
    with open(filename, "wb") as f:
        f.write(b"partial")
    raise RuntimeError("Check failed: fwrite(ptr, 1, size, fp_) == size: FileStream.Write incomplete")


def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "f.json"
    files.atomic_write_json(str(target), {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}

    def broken(f):
        f.write(b"partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        files.atomic_write(str(target), broken)
    assert json.loads(target.read_text()) == {"a": 1}  # old content intact
    assert os.listdir(tmp_path / "sub") == ["f.json"]






def test_failed_save_on_a_full_disk_says_so_and_where(tmp_path, monkeypatch):
    # MXNet's own message for a full disk names neither the cause nor the file.
    monkeypatch.setattr(files.os, "statvfs", lambda _path: _Room(free=0))
    target = tmp_path / "checkpoint.params"
    with pytest.raises(OSError) as raised:
        files.atomic_save(str(target), _failing_save)
    assert raised.value.errno == errno.ENOSPC
    assert str(raised.value).startswith(f"[Errno 28] No space left on device while saving {target}")
    assert os.listdir(tmp_path) == []  # the partial temp file is gone


def test_failed_save_with_room_left_keeps_its_own_error(tmp_path, monkeypatch):
    monkeypatch.setattr(files.os, "statvfs", lambda _path: _Room(free=64 << 20))
    with pytest.raises(RuntimeError, match="FileStream.Write incomplete"):
        files.atomic_save(str(tmp_path / "checkpoint.params"), _failing_save)


def test_enospc_from_python_gets_the_path(tmp_path, monkeypatch):
    monkeypatch.setattr(files.os, "statvfs", lambda _path: _Room(free=0))

    def full(_f):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match=r"while saving .*state\.json \(0 KiB free of 8192 KiB\)"):
        files.atomic_write(str(tmp_path / "state.json"), full)

"""scripts/tar_within.py, which the SDK tests extract output.tar.gz with: a plain archive comes out whole, and each
kind of archive that could write outside the target is refused by its own check, before anything is written, on
every Python (with tarfile's "data" filter and, as on Debian 12's 3.11.2, without it)."""

import io
import tarfile

import pytest
import tar_within
from tar_within import UnsafeMember, extract_within


@pytest.fixture(params=["tarfile's data filter where present", "no data filter (Python < 3.11.4)"])
def filter_presence(request, monkeypatch):
    if request.param.startswith("no"):
        if hasattr(tarfile, "fully_trusted_filter"):
            # What extractall does with no filter before 3.14 (3.12 and 3.13 also warn that 3.14 will filter).
            monkeypatch.setattr(tarfile.TarFile, "extraction_filter", staticmethod(tarfile.fully_trusted_filter))
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return request.param


def member(name, kind=tarfile.REGTYPE, data=b"", linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.linkname = linkname
    return info, io.BytesIO(data) if kind == tarfile.REGTYPE else None


def write_archive(path, members):
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            archive.addfile(info, data)
    return path


def test_a_plain_archive_comes_out_whole(tmp_path, filter_presence):
    path = write_archive(tmp_path / "a.tar.gz", [member("tensors", tarfile.DIRTYPE),
                                                 member("tensors/events/step0.bin", data=b"\x00\x01loss"),
                                                 member("other.txt", data=b"not chosen")])
    target = tmp_path / "out"
    with tarfile.open(path) as archive:
        extract_within(archive, target, [m for m in archive.getmembers() if m.name.startswith("tensors")])
    assert (target / "tensors" / "events" / "step0.bin").read_bytes() == b"\x00\x01loss"
    assert not (target / "other.txt").exists()


@pytest.mark.parametrize("bad", [
    pytest.param(lambda root: member("tensors/../../../escaped.txt", data=b"x"), id="dot-dot"),
    pytest.param(lambda root: member(str(root / "escaped.txt"), data=b"x"), id="absolute"),
    pytest.param(lambda root: member("tensors/link", tarfile.SYMTYPE, linkname=str(root)), id="symlink"),
    pytest.param(lambda root: member("tensors/hard", tarfile.LNKTYPE, linkname=str(root / "victim.txt")),
                 id="hardlink"),
    pytest.param(lambda root: member("tensors/dev", tarfile.CHRTYPE), id="device"),
])
def test_a_member_that_could_leave_the_target_is_refused_and_nothing_is_written(tmp_path, filter_presence, bad):
    path = write_archive(tmp_path / "bad.tar.gz", [member("tensors/good.txt", data=b"fine"), bad(tmp_path)])
    (tmp_path / "victim.txt").write_text("outside")
    target = tmp_path / "deep" / "out"
    target.mkdir(parents=True)
    with tarfile.open(path) as archive, pytest.raises(UnsafeMember, match="refusing to extract"):
        extract_within(archive, target)
    assert list(target.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tar.gz", "deep", "victim.txt"]


def test_a_link_already_in_the_target_does_not_lead_out(tmp_path, filter_presence):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "out"
    target.mkdir()
    (target / "tensors").symlink_to(outside)
    path = write_archive(tmp_path / "a.tar.gz", [member("tensors/step0.bin", data=b"x")])
    with tarfile.open(path) as archive, pytest.raises(UnsafeMember, match="outside"):
        extract_within(archive, target)
    assert list(outside.iterdir()) == []


def test_the_reason_names_the_member(tmp_path):
    assert tar_within.unsafe_reason(member("a/../../b", data=b"")[0], tmp_path) == "a '..' component"

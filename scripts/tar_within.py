"""Extract a tar archive's members into a folder, refusing any member that would land outside it.

tarfile's own guard, extractall(filter="data"), exists only from Python 3.11.4 (and 3.10.12) on; the host side
supports 3.10 and Debian 12's 3.11.2 (docs/testing.md), so the check is done here, on every Python, before
anything is written: only regular files and folders, each named by a relative path that stays inside the target.
Links are refused too, not judged: an archive of results has none. Where tarfile has the "data" filter, it runs as
well. Stdlib only."""

from __future__ import annotations

import tarfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath


class UnsafeMember(ValueError):
    """A member that could write outside the target folder, or is not a plain file or folder."""


def unsafe_reason(member: tarfile.TarInfo, target: Path) -> str | None:
    """Why extracting `member` into `target` (resolved) is refused, or None when it is a file or folder inside it."""
    if not (member.isfile() or member.isdir()):
        return "not a regular file or folder (a link, device or fifo)"
    name = PurePosixPath(member.name)
    if not name.parts or name.is_absolute():
        return "an absolute or empty name"
    if ".." in name.parts:
        return "a '..' component"
    destination = (target / name).resolve()
    if destination != target and target not in destination.parents:
        return f"resolves to {destination}, outside {target}"
    return None


def extract_within(archive: tarfile.TarFile, target: Path, members: Iterable[tarfile.TarInfo] | None = None) -> None:
    """Extract `members` (default: all) of `archive` into `target`; raise UnsafeMember, writing nothing, if any
    member is refused."""
    target = Path(target).resolve()
    chosen = list(archive.getmembers() if members is None else members)
    refused = [(member.name, reason) for member in chosen if (reason := unsafe_reason(member, target))]
    if refused:
        raise UnsafeMember("refusing to extract " + "; ".join(f"{name!r}: {why}" for name, why in refused))
    data_filter = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    archive.extractall(target, members=chosen, **data_filter)

"""The job's outcome files on this host: /opt/ml/output/failure (what SageMaker shows as FailureReason),
the empty `success` the toolkit writes, what the user's own program wrote to the failure file, and files
written where SageMaker would not upload them, copied into output/data at the end.

The job's outcome files of an earlier run in the same directory are cleared at the start (SDK local mode and
scripts/local_job/ can reuse a directory; on SageMaker it starts empty), so what is there at the end was
written by this job.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from sagemaker_mxnet_horovod.core.failure import FAILURE_LIMIT, Failure, compose_failure, fit, shorten
from sagemaker_mxnet_horovod.core.plan import StrayOutput


def write_failure_file(path: Path, failure: Failure,
                       other_hosts_texts: Sequence[tuple[str, str | None]] = ()) -> str:
    """The failure file: what the user's program wrote there during the job (this host's, then other hosts'
    (host, text) pairs) first, then the launcher's diagnosis. Returns what was written."""
    own = read_user_failure(path)
    return write_failure(path, compose_failure(failure.render(), [(None, own), *other_hosts_texts]))


def read_user_failure(path: Path, limit: int = FAILURE_LIMIT) -> str | None:
    """What the user's program wrote to the failure file during this job (stripped), None if nothing."""
    try:
        with path.open(encoding="utf-8", errors="replace") as file:
            text = file.read(limit).strip()
    except (FileNotFoundError, IsADirectoryError):
        return None
    return text or None


def clear_previous_outcome(output_dir: Path) -> list[str]:
    """Remove `failure` and `success` left by an earlier run in this directory; describes each removed."""
    removed = []
    for name in ("failure", "success"):
        path = output_dir / name
        if path.is_file():
            first = (read_user_failure(path) or "").partition("\n")[0]
            path.unlink()
            removed.append(f"{path}" + (f" ({shorten(first)})" if first else ""))
    return removed


def write_success(output_dir: Path) -> Path:
    """The empty `success` file the toolkit writes after a successful job."""
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / "success"
    path.write_text("")
    return path


def write_failure(path: Path, message: str) -> str:
    """Write the failure file atomically; returns what was written."""
    text = fit(message)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text + "\n")
    os.replace(tmp, path)
    return text


def copy_stray_outputs(strays: tuple[StrayOutput, ...], log: Callable[[str], None]) -> None:
    """At the job's end, on each host: put what exists of them into output/data (a hard link where possible:
    a timeline can be gigabytes). Never fails the job; never overwrites a file the job wrote there."""
    for stray in strays:
        if not os.path.lexists(stray.path):
            continue
        if os.path.lexists(stray.copy_to):
            log(f"not copying {stray.path}: {stray.copy_to} already exists")
            continue
        try:
            os.makedirs(os.path.dirname(stray.copy_to), exist_ok=True)
            if os.path.isdir(stray.path):
                shutil.copytree(stray.path, stray.copy_to)
            else:
                try:
                    os.link(stray.path, stray.copy_to)
                except OSError:
                    shutil.copy2(stray.path, stray.copy_to)
            log(f"copied {stray.path} to {stray.copy_to} (uploaded with output.tar.gz)")
        except OSError as error:
            log(f"could not copy {stray.path} to {stray.copy_to}: {error}")

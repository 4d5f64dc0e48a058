"""Each host's /opt/ml for local_job (run.py), as SageMaker writes it: its config files, the code, the Pipe-mode
channels fed through FIFOs, and the start gate that lets every host's command start at once. Stdlib only."""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time
from pathlib import Path

from .containers import RunningJob
from .spec import START_GATE, Channel, JobSpec


def prepare_host(root: Path, spec: JobSpec, host: str, hosts: list) -> None:
    config = root / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    for sub in ("model", "output/data", "checkpoints", "input/data"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    groups = spec.instance_groups or {"homogeneousCluster": hosts}
    (config / "resourceconfig.json").write_text(json.dumps({
        "current_host": host, "hosts": hosts, "network_interface_name": spec.interface_name,
        "current_instance_type": spec.instance_type,
        "current_group_name": next((name for name, members in groups.items() if host in members), None),
        "instance_groups": [{"instance_group_name": name, "instance_type": spec.instance_type, "hosts": list(members)}
                            for name, members in groups.items()],
    }))
    # SDK v2 JSON-encodes every hyperparameter value; do the same so the launcher sees what SageMaker sends.
    (config / "hyperparameters.json").write_text(json.dumps({k: json.dumps(v) for k, v in spec.hyperparameters.items()}))
    (config / "inputdataconfig.json").write_text(json.dumps({
        c.name: {"TrainingInputMode": c.mode, "S3DistributionType": c.distribution, "RecordWrapperType": "None"}
        for c in spec.channels}))
    for name, text in spec.config_files.items():
        (config / name).write_text(text)


def set_up_host(root: Path, spec: JobSpec, host: str, hosts: list, stop_feeding: threading.Event) -> None:
    """The host's /opt/ml: config files, the code, and a feeder thread for each Pipe-mode channel."""
    prepare_host(root, spec, host, hosts)
    if spec.start_gate:
        os.mkfifo(root / START_GATE)
    if spec.code_dir:
        shutil.copytree(spec.code_dir, root / "code", dirs_exist_ok=True)
    data_dir = root / "input" / "data"
    for channel in spec.channels:
        if channel.mode == "Pipe":
            for epoch in range(spec.pipe_epochs):
                os.mkfifo(data_dir / f"{channel.name}_{epoch}")
            threading.Thread(target=feed_pipes, args=(data_dir, channel, spec.pipe_epochs, stop_feeding),
                             daemon=True).start()


def feed_pipes(data_dir: Path, channel: Channel, epochs: int, stop: threading.Event) -> None:
    """SageMaker Pipe mode: FIFO <channel>_<epoch>, one per epoch, each carrying the whole channel."""
    files = sorted(p for p in channel.source.rglob("*") if p.is_file())
    for epoch in range(epochs):
        fifo = data_dir / f"{channel.name}_{epoch}"
        if not fifo.exists():
            os.mkfifo(fifo)
        try:
            fd = os.open(fifo, os.O_WRONLY)  # blocks until the rank opens it
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as out:
                for path in files:
                    with open(path, "rb") as f:
                        shutil.copyfileobj(f, out)
        except (BrokenPipeError, OSError):
            pass
        if stop.is_set():
            return


def open_start_gate(spec: JobSpec, workdir: Path, hosts: list, handle: RunningJob, started_at: float) -> float:
    """Once every host's command waits at its gate (a FIFO it opened for reading), let them all through at once;
    returns that moment (epoch seconds)."""
    writers: dict = {}
    pending = [h for h in hosts if h not in spec.skip_hosts]
    try:
        while pending:
            if handle.start_errors:
                raise RuntimeError(f"a container did not start: {handle.start_errors[0]}")
            gone = [h for h in pending if h in handle.exited]
            if gone:
                raise RuntimeError(f"the start gate: {', '.join(gone)} exited before reaching it")
            if time.monotonic() > started_at + spec.timeout_s:
                raise RuntimeError(f"the start gate: {', '.join(pending)} never reached it")
            for host in list(pending):
                try:
                    writers[host] = os.open(workdir / host / START_GATE, os.O_WRONLY | os.O_NONBLOCK)
                    pending.remove(host)
                except OSError as error:
                    if error.errno != errno.ENXIO:
                        raise
            if pending:
                time.sleep(0.01)  # a FIFO's writer cannot wait for its reader with a deadline: ENXIO until then
        gate_at = time.time()
        for fd in writers.values():
            os.write(fd, b"go\n")
        return gate_at
    finally:
        for fd in writers.values():
            os.close(fd)

"""inputdataconfig.json: the job's channels and how each is read (File, Pipe or FastFile)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagemaker_mxnet_horovod.core.exits import ConfigError


@dataclass(frozen=True)
class Channel:
    name: str
    input_mode: str = "File"  # File | Pipe | FastFile
    content_type: str | None = None
    s3_distribution_type: str | None = None


def parse_input_data_config(data: Any, source: str = "inputdataconfig.json") -> tuple[Channel, ...]:
    if data is None:
        return ()
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a JSON object of channels")
    channels = []
    for name in sorted(data):
        spec = data[name]
        if not isinstance(spec, dict):
            raise ConfigError(f"{source}: channel {name!r} must be an object, got {spec!r}")
        mode = spec.get("TrainingInputMode", "File")
        if mode not in ("File", "Pipe", "FastFile"):
            raise ConfigError(f"{source}: channel {name!r} has TrainingInputMode {mode!r} (File, Pipe or FastFile)")
        channels.append(
            Channel(
                name=name,
                input_mode=mode,
                content_type=spec.get("ContentType"),
                s3_distribution_type=spec.get("S3DistributionType"),
            )
        )
    return tuple(channels)

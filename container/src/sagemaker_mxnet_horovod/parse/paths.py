"""Where SageMaker's files are: /opt/ml and the directories under it (another root in tests)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Paths:
    base: Path  # /opt/ml unless SAGEMAKER_BASE_DIR says otherwise (tests)
    # The job's LocalPath in checkpointconfig.json / tensorboardoutputconfig.json (parse/output_config.py), if any.
    checkpoint_local_path: Path | None = None
    tensorboard_local_path: Path | None = None

    @property
    def config_dir(self) -> Path:
        return self.base / "input" / "config"

    @property
    def input_dir(self) -> Path:
        return self.base / "input"

    @property
    def data_dir(self) -> Path:
        return self.base / "input" / "data"

    @property
    def model_dir(self) -> Path:
        return self.base / "model"

    @property
    def output_dir(self) -> Path:
        return self.base / "output"

    @property
    def output_data_dir(self) -> Path:
        return self.base / "output" / "data"

    @property
    def output_intermediate_dir(self) -> Path:
        return self.base / "output" / "intermediate"

    @property
    def failure_file(self) -> Path:
        return self.base / "output" / "failure"

    @property
    def code_dir(self) -> Path:
        return self.base / "code"

    @property
    def checkpoint_dir(self) -> Path:
        """Where SageMaker syncs checkpoints with S3 and restores them into on a restart."""
        return self.checkpoint_local_path or self.base / "checkpoints"

    @property
    def tensorboard_dir(self) -> Path:
        """Where SageMaker uploads TensorBoard events from (TensorBoardOutputConfig)."""
        return self.tensorboard_local_path or self.base / "output" / "tensorboard"

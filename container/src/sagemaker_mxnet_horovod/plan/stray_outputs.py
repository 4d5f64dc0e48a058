"""Files a job is told to write under /opt/ml/output but outside /opt/ml/output/data.

SageMaker uploads /opt/ml/output/data (output.tar.gz) and reads the failure file; anything else there is lost
when the instance goes. AWS's Horovod blog posts pass `-x HOROVOD_TIMELINE=/opt/ml/output/timeline.json`, so
such paths are found before the job starts (a warning in the log, with the fix) and copied into output/data
when it ends: /opt/ml/output/X becomes /opt/ml/output/data/X.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import PurePosixPath

from sagemaker_mxnet_horovod.core.plan import StrayOutput
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.settings import KEYS

# Variables whose value is a file Horovod writes, when set in the job's environment.
OUTPUT_FILE_VARIABLES = ("HOROVOD_TIMELINE", "HOROVOD_AUTOTUNE_LOG")
# Under /opt/ml/output, what SageMaker does take: the data directory, its own status files, the intermediate
# directory (synced while training when sagemaker_s3_output is set) and TensorBoardOutputConfig's usual path.
UPLOADED = ("data", "failure", "success", "intermediate", "tensorboard")
# The launcher's own switches for these files, which write them to output/data.
SWITCHES = {"HOROVOD_TIMELINE": f"{KEYS.horovod_timeline}: true",
            "HOROVOD_AUTOTUNE_LOG": f"{KEYS.horovod_autotune}: true"}




def warning(stray: StrayOutput, paths: Paths) -> str:
    """The start log's warning, with the fix."""
    switch = f" (or the hyperparameter {SWITCHES[stray.variable]})" if stray.variable in SWITCHES else ""
    return (f"WARNING {stray.variable}={stray.path} is outside {paths.output_data_dir}, the only part of "
            f"{paths.output_dir} SageMaker uploads (output.tar.gz): this launcher copies it to {stray.copy_to} "
            f"when the job ends; write it there directly with {stray.variable}={stray.copy_to}{switch}")


def stray_path(paths: Paths, value: str) -> str | None:
    """Where in output/data a path SageMaker would not upload belongs, or None if it is fine."""
    if not value.startswith("/"):
        return None
    path = PurePosixPath(os.path.normpath(value))
    output = PurePosixPath(paths.output_dir)
    if path == output or output not in path.parents:
        return None
    relative = path.relative_to(output)
    if relative.parts[0] in UPLOADED:
        return None
    return str(PurePosixPath(paths.output_data_dir) / relative)


def find_stray_outputs(paths: Paths, rank_variables: Mapping[str, str],
                       env: Mapping[str, str]) -> list[StrayOutput]:
    """Every file the job is told to write where SageMaker will not upload it: any of the variables the backend
    gives the ranks (rank_variables: MPI's `-x NAME=PATH` in the user's options) and OUTPUT_FILE_VARIABLES in the
    environment. The backend's wins over the environment for the same name, as on the ranks."""
    values = {name: env[name] for name in OUTPUT_FILE_VARIABLES if name in env}
    values.update(rank_variables)
    strays = []
    for name, value in values.items():
        copy_to = stray_path(paths, value)
        if copy_to:
            strays.append(StrayOutput(name, os.path.normpath(value), copy_to))
    return strays

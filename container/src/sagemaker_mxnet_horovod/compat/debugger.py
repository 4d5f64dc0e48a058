"""SageMaker Debugger and Profiler configurations a job may carry, and what this image does with them: the start log
says so, once per job.

SageMaker writes a job's DebugHookConfig to /opt/ml/input/config/debughookconfig.json and its ProfilerConfig to
profilerconfig.json. SDK v2 gives every Estimator both unless told otherwise (debugger_hook_config=False,
disable_profiler=True); SDK v3's ModelTrainer gives neither. Inside the container both are for smdebug, the
Debugger's client library, which AWS's framework images patch into their frameworks and this image does not
include: the hook saves no tensors and framework profiling collects nothing. System monitoring (CPU, GPU,
memory, network) is SageMaker's own, outside the container, and works as anywhere. Pure but for reading the two
files; a file that cannot be read is said, never an error (the job does not need it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

HOOK_FILE = "debughookconfig.json"
PROFILER_FILE = "profilerconfig.json"
# ProfilingParameters keys that ask smdebug for framework profiling (the rest are its bookkeeping).
FRAMEWORK_PROFILING = ("DetailedProfilingConfig", "DataloaderProfilingConfig", "PythonProfilingConfig",
                       "HorovodProfilingConfig", "SMDataParallelProfilingConfig")
MXNET_INSTEAD = ("for Horovod's own trace of every collective set horovod_timeline: true "
                 "(output/data/horovod_timeline.json); MXNet's profiler (mx.profiler) writes where your script says")


def read_configs(config_dir: Path) -> dict[str, Any]:
    """The two files, parsed, by name: absent ones left out, one that cannot be read as the OSError/ValueError."""
    found: dict[str, Any] = {}
    for name in (HOOK_FILE, PROFILER_FILE):
        try:
            found[name] = json.loads((config_dir / name).read_text())
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as error:
            found[name] = error
    return found


def hook_note(config: Any) -> str:
    if isinstance(config, Exception):
        return f"SageMaker Debugger: {HOOK_FILE} cannot be read ({config}); this image does not use it"
    where = config.get("S3OutputPath") if isinstance(config, dict) else None
    return (f"SageMaker Debugger hook configuration found ({HOOK_FILE}"
            + (f", S3OutputPath {where}" if where else "") + "): this image has no smdebug, so no tensors are "
            "saved and nothing is uploaded for it. SDK v2 adds it to every job: pass debugger_hook_config=False "
            "to the Estimator to leave it out")


def profiler_note(config: Any) -> str:
    if isinstance(config, Exception):
        return f"SageMaker Profiler: {PROFILER_FILE} cannot be read ({config}); this image does not use it"
    parameters = config.get("ProfilingParameters") if isinstance(config, dict) else None
    asked = sorted(key for key in (parameters if isinstance(parameters, dict) else {}) if key in FRAMEWORK_PROFILING)
    if not asked:
        return (f"SageMaker Profiler configuration found ({PROFILER_FILE}): system monitoring is SageMaker's own, "
                "outside the container, and works; no framework profiling was asked for. SDK v2 adds it to every "
                "job: pass disable_profiler=True to the Estimator to leave it out")
    return (f"SageMaker Profiler: framework profiling asked for ({', '.join(asked)}) needs smdebug, which this image "
            f"does not include: nothing is collected. Instead, {MXNET_INSTEAD}")


def notes(configs: Mapping[str, Any]) -> list[str]:
    """What the start log says about each configuration the job carries (read_configs' result)."""
    found = []
    if HOOK_FILE in configs:
        found.append(hook_note(configs[HOOK_FILE]))
    if PROFILER_FILE in configs:
        found.append(profiler_note(configs[PROFILER_FILE]))
    return found

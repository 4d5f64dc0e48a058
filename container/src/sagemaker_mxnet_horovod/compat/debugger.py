"""SageMaker Debugger and Profiler configurations a job may carry, and what this image does with them: the start log
says so, once per job.

SageMaker writes a job's DebugHookConfig to /opt/ml/input/config/debughookconfig.json and its ProfilerConfig to
profilerconfig.json; SDK v2 gives every Estimator both unless told otherwise, SDK v3's ModelTrainer neither. The
image carries smdebug, Debugger's client library: the built-in programs save what the hook configuration asks for,
a user's script gets its hook from smdebug's API or, without one, at its first training step
(sagemaker_mxnet_debugger: docs/debugger.md). Here the files are only read and checked: a configuration that cannot
be used is said once, and the job trains without the hook, as SageMaker's own images do. Pure but for reading the
two files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sagemaker_mxnet_debugger.config import (
    HOOK_FILE,
    PROFILER_FILE,
    HookConfigProblem,
    parse_hook_config,
    profiler_requests,
)

from sagemaker_mxnet_horovod.parse.settings import KEYS

MXNET_INSTEAD = (f"for Horovod's own trace of every collective set {KEYS.horovod_timeline}: true "
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
    try:
        if isinstance(config, Exception):
            raise HookConfigProblem(f"cannot be read ({config})")
        hook = parse_hook_config(config)
    except HookConfigProblem as problem:
        return (f"SageMaker Debugger: {HOOK_FILE} {problem}; the job trains without Debugger's hook: no tensors "
                "are saved")
    return (f"SageMaker Debugger hook configuration ({HOOK_FILE}): {hook.describe()}. The built-in programs save "
            "it; a script of yours gets the hook smdebug's API makes from it, or one registered at its first "
            "training step (docs/debugger.md)")


def profiler_note(config: Any) -> str:
    if isinstance(config, Exception):
        return f"SageMaker Profiler: {PROFILER_FILE} cannot be read ({config}); this image does not use it"
    asked = profiler_requests(config)
    if not asked:
        return (f"SageMaker Profiler configuration found ({PROFILER_FILE}): system monitoring is SageMaker's own, "
                "outside the container, and works; no framework profiling was asked for")
    return (f"SageMaker Profiler: framework profiling asked for ({', '.join(asked)}): smdebug's MXNet hook records "
            f"none of it (smdebug profiles TensorFlow and PyTorch only; docs/debugger.md). Instead, {MXNET_INSTEAD}")


def notes(configs: Mapping[str, Any]) -> list[str]:
    """What the start log says about each configuration the job carries (read_configs' result)."""
    found = []
    if HOOK_FILE in configs:
        found.append(hook_note(configs[HOOK_FILE]))
    if PROFILER_FILE in configs:
        found.append(profiler_note(configs[PROFILER_FILE]))
    return found

"""The SageMaker Debugger configuration files of a job, checked against the shape SageMaker writes. Pure: standard
library only (the launcher reads them for its start log, the hook module before it imports smdebug).

SageMaker writes the job's DebugHookConfig to /opt/ml/input/config/debughookconfig.json: the CreateTrainingJob
fields (S3OutputPath, LocalPath, HookParameters, CollectionConfigurations: SDK v2's DebuggerHookConfig request
builder) with LocalPath defaulting to /opt/ml/output/tensors, the directory SageMaker uploads to S3OutputPath while
the job runs. smdebug reads it (smdebug/core/json_config.py): HookParameters and each collection's
CollectionParameters are string maps (save_interval, save_steps, start_step, end_step, with train./eval./predict./
global. prefixes; include_workers one|all; reductions, include_regex, save_all, ...). A file of another shape, a
future format this image does not know, or values smdebug would fail on later, is a HookConfigProblem: the job
trains without the hook.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONFIG_DIR = Path("/opt/ml/input/config")
HOOK_FILE = "debughookconfig.json"
PROFILER_FILE = "profilerconfig.json"
# smdebug's own variable for the hook configuration's path (smdebug.core.config_constants).
HOOK_PATH_VARIABLE = "SMDEBUG_CONFIG_FILE_PATH"
DEFAULT_LOCAL_PATH = "/opt/ml/output/tensors"
HOOK_KEYS = ("S3OutputPath", "LocalPath", "HookParameters", "CollectionConfigurations")
STEP_KEYS = ("save_interval", "start_step", "end_step")
MODE_PREFIXES = ("", "train.", "eval.", "predict.", "global.")
# ProfilingParameters keys that ask smdebug for framework profiling (the rest is its bookkeeping).
FRAMEWORK_PROFILING = ("DetailedProfilingConfig", "DataloaderProfilingConfig", "PythonProfilingConfig",
                       "HorovodProfilingConfig", "SMDataParallelProfilingConfig")


class HookConfigProblem(ValueError):
    """The hook configuration cannot be used: the reason, in one line."""


@dataclass(frozen=True)
class HookConfig:
    local_path: str
    s3_output_path: str | None
    collections: tuple[str, ...]  # as asked for; () is smdebug's default for MXNet: losses
    save_interval: str  # HookParameters' save_interval, or smdebug's default (500)
    all_workers: bool  # include_workers "all": every rank saves; "one" (default): rank 0

    def describe(self) -> str:
        collections = ", ".join(self.collections) or "losses (smdebug's default)"
        ranks = "every rank (include_workers all)" if self.all_workers else "rank 0 (include_workers one)"
        return (f"collections {collections}; every {self.save_interval} steps; saved by {ranks} to "
                f"{self.local_path}" + (f", which SageMaker uploads to {self.s3_output_path}"
                                        if self.s3_output_path else ""))


def hook_config_path(env: Mapping[str, str] | None = None, config_dir: Path = CONFIG_DIR) -> Path:
    env = os.environ if env is None else env
    return Path(env.get(HOOK_PATH_VARIABLE) or config_dir / HOOK_FILE)


def _string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, float, bool)) for v in value.values()):
        raise HookConfigProblem(f"{where} is not a map of strings: {json.dumps(value)[:120]}")
    return {str(k): str(v) for k, v in value.items()}


def _check_parameters(parameters: dict[str, str], where: str) -> None:
    """The values smdebug parses as numbers or choices, checked now rather than failing at the first step."""
    for prefix in MODE_PREFIXES:
        for key in STEP_KEYS:
            value = parameters.get(prefix + key)
            if value is not None and not re.fullmatch(r"\d+", value.strip()):
                raise HookConfigProblem(f"{where} {prefix + key}={value!r} is not a whole number of steps")
        steps = parameters.get(prefix + "save_steps")
        if steps is not None and not re.fullmatch(r"\s*\d+\s*(,\s*\d+\s*)*", steps):
            raise HookConfigProblem(f"{where} {prefix}save_steps={steps!r} is not a comma-separated list of steps")
    if parameters.get("save_interval", "1").strip() == "0":
        raise HookConfigProblem(f"{where} save_interval=0: smdebug needs at least 1")
    workers = parameters.get("include_workers")
    if workers is not None and workers not in ("one", "all"):
        raise HookConfigProblem(f"{where} include_workers={workers!r}: smdebug knows 'one' and 'all'")


def parse_hook_config(raw: Any) -> HookConfig:
    """debughookconfig.json's content (parsed JSON) -> HookConfig, or HookConfigProblem saying what is wrong."""
    if not isinstance(raw, dict):
        raise HookConfigProblem(f"not a JSON object but {type(raw).__name__}")
    unknown = sorted(set(raw) - set(HOOK_KEYS))
    if unknown:
        raise HookConfigProblem(f"unknown key(s) {', '.join(unknown)}: not the DebugHookConfig this image knows "
                                f"({', '.join(HOOK_KEYS)}), perhaps a newer version of it")
    for key in ("S3OutputPath", "LocalPath"):
        if raw.get(key) is not None and not (isinstance(raw[key], str) and raw[key]):
            raise HookConfigProblem(f"{key} is not a path: {json.dumps(raw[key])}")
    local_path = raw.get("LocalPath") or DEFAULT_LOCAL_PATH
    if not local_path.startswith("/"):
        raise HookConfigProblem(f"LocalPath {local_path!r} is not an absolute path in the container")
    hook_parameters = _string_map(raw.get("HookParameters"), "HookParameters")
    _check_parameters(hook_parameters, "HookParameters")
    collections = raw.get("CollectionConfigurations") or []
    if not isinstance(collections, list):
        raise HookConfigProblem(f"CollectionConfigurations is not a list: {json.dumps(collections)[:120]}")
    names = []
    for index, collection in enumerate(collections):
        where = f"CollectionConfigurations[{index}]"
        if not isinstance(collection, dict) or not isinstance(collection.get("CollectionName"), str) \
                or not collection["CollectionName"]:
            raise HookConfigProblem(f"{where} has no CollectionName: {json.dumps(collection)[:120]}")
        extra = sorted(set(collection) - {"CollectionName", "CollectionParameters"})
        if extra:
            raise HookConfigProblem(f"{where} has unknown key(s) {', '.join(extra)}")
        _check_parameters(_string_map(collection.get("CollectionParameters"), f"{where} CollectionParameters"),
                          f"{where} ({collection['CollectionName']})")
        names.append(collection["CollectionName"])
    return HookConfig(local_path=local_path, s3_output_path=raw.get("S3OutputPath"), collections=tuple(names),
                      save_interval=hook_parameters.get("save_interval", "500").strip(),
                      all_workers=hook_parameters.get("include_workers") == "all")


def load_hook_config(path: Path) -> HookConfig | None:
    """The hook configuration at `path`, None if there is none, HookConfigProblem if it cannot be used."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise HookConfigProblem(f"cannot be read: {error.strerror or error}") from None
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise HookConfigProblem(f"is not valid JSON ({error})") from None
    return parse_hook_config(raw)


def profiler_requests(raw: Any) -> tuple[str, ...]:
    """The framework profiling a profilerconfig.json asks for (ProfilingParameters keys), () for none or disabled."""
    if not isinstance(raw, dict) or str(raw.get("DisableProfiler", "")).lower() == "true":
        return ()
    parameters = raw.get("ProfilingParameters")
    return tuple(sorted(key for key in (parameters if isinstance(parameters, dict) else {})
                        if key in FRAMEWORK_PROFILING))

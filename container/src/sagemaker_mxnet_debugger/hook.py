"""An smdebug hook for this process, made from the job's hook configuration, or None and one warning line.

Never an error: a configuration that cannot be used (config.HookConfigProblem), a LocalPath this process cannot
write, or smdebug failing to make the hook each leave the job training without it, as SageMaker's own images do.
The hook it returns hands every error of its own callbacks to smdebug's error handling, which logs it and turns
smdebug off for the rest of the job; smdebug does that by itself only for SageMaker's default configuration, and a
job with collections configured would otherwise crash in the middle of a step.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from sagemaker_mxnet_debugger.config import HookConfigProblem, hook_config_path, load_hook_config


def warn(who: str, message: str) -> None:
    sys.stderr.write(f"{who}: warning: SageMaker Debugger: {message}\n")
    sys.stderr.flush()


def writable_directory_problem(path: str) -> str | None:
    """Why this process cannot write files under `path` (made if missing), or None."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as error:
        return f"LocalPath {path} is not writable here ({error.strerror or error})"
    return None


def guarded(hook):
    """The hook, with smdebug's error handling on for every configuration (see the module's docstring)."""
    hook.has_default_configuration = lambda: True
    return hook


def open_hook(who: str, env: Mapping[str, str] | None = None, path: Path | None = None):
    """smdebug.mxnet's Hook for the job's configuration (registered as smdebug's hook singleton), or None: no
    configuration (silently), or one that cannot be used (a warning naming why)."""
    path = path or hook_config_path(env)
    try:
        config = load_hook_config(path)
    except HookConfigProblem as problem:
        warn(who, f"{path} {problem}; training goes on without the hook")
        return None
    if config is None:
        return None
    problem = writable_directory_problem(config.local_path)
    if problem:
        warn(who, f"{problem}; training goes on without the hook")
        return None
    try:
        import smdebug.mxnet as smd

        return guarded(smd.Hook.create_from_json_file(str(path)))
    except Exception as error:  # noqa: BLE001 - whatever smdebug raises, the job trains on without it
        warn(who, f"smdebug could not make a hook from {path} ({type(error).__name__}: {error}); "
                  "training goes on without the hook")
        return None

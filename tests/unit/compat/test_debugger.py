"""debugger.py: what the start log says about a job's SageMaker Debugger hook and Profiler configurations, for the
files SDK v2 makes SageMaker write (tests/fixtures/debugger, built by the real SDK: tests/sdk/test_sdk_debugger.py)."""

import json
from pathlib import Path

from sagemaker_mxnet_horovod.compat.debugger import HOOK_FILE, PROFILER_FILE, notes, read_configs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "debugger"


def fixture(name):
    return json.loads((FIXTURES / name).read_text())


def test_sdk_v2s_default_hook_says_what_is_saved_where():
    (note,) = notes({HOOK_FILE: fixture("sdk-v2-default.debughookconfig.json")})
    assert note == ("SageMaker Debugger hook configuration (debughookconfig.json): collections losses (smdebug's "
                    "default); every 500 steps; saved by rank 0 (include_workers one) to /opt/ml/output/tensors, "
                    "which SageMaker uploads to s3://bucket/job/output. The built-in programs save it; a script of "
                    "yours gets the hook smdebug's API makes from it, or one registered at its first training step "
                    "(docs/debugger.md)")


def test_a_hook_configuration_that_cannot_be_used_says_the_job_trains_without_it():
    (note,) = notes({HOOK_FILE: {"LocalPath": "/opt/ml/output/tensors", "HookParameters": {"save_interval": "x"}}})
    assert note == ("SageMaker Debugger: debughookconfig.json HookParameters save_interval='x' is not a whole number "
                    "of steps; the job trains without Debugger's hook: no tensors are saved")


def test_the_default_profiler_is_system_monitoring_which_works():
    (note,) = notes({PROFILER_FILE: fixture("sdk-v2-default.profilerconfig.json")})
    assert "system monitoring is SageMaker's own, outside the container, and works" in note


def test_framework_profiling_asked_for_says_smdebug_records_none_for_mxnet():
    (note,) = notes({PROFILER_FILE: fixture("sdk-v2-framework-profile.profilerconfig.json")})
    assert note.startswith("SageMaker Profiler: framework profiling asked for (DataloaderProfilingConfig, "
                           "DetailedProfilingConfig, HorovodProfilingConfig, PythonProfilingConfig, "
                           "SMDataParallelProfilingConfig): smdebug's MXNet hook records none of it")
    assert "set horovod_timeline: true" in note


def test_read_configs_from_the_config_directory(tmp_path):
    assert read_configs(tmp_path) == {} and notes({}) == []
    (tmp_path / HOOK_FILE).write_text("{cut short")
    (tmp_path / PROFILER_FILE).write_text("not json")
    configs = read_configs(tmp_path)
    assert isinstance(configs[HOOK_FILE], ValueError) and isinstance(configs[PROFILER_FILE], ValueError)
    hook, profiler = notes(configs)
    assert hook.startswith("SageMaker Debugger: debughookconfig.json cannot be read (Expecting property name")
    assert hook.endswith("the job trains without Debugger's hook: no tensors are saved")
    assert profiler.startswith("SageMaker Profiler: profilerconfig.json cannot be read (Expecting value")

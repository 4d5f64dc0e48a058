"""debugger.py: what the start log says about a job's SageMaker Debugger hook and Profiler configurations. The files'
shapes are SageMaker's CreateTrainingJob fields as SDK v2 2.257 sends them (DebugHookConfig: S3OutputPath,
LocalPath, CollectionConfigurations; ProfilerConfig: S3OutputPath, ProfilingIntervalInMilliseconds,
ProfilingParameters), which smdebug reads from those two files."""

import json

from sagemaker_mxnet_horovod.compat.debugger import HOOK_FILE, PROFILER_FILE, notes, read_configs

SDK_V2_DEFAULT_HOOK = {"S3OutputPath": "s3://bucket/job/output", "CollectionConfigurations": []}
SDK_V2_DEFAULT_PROFILER = {"S3OutputPath": "s3://bucket/job/output", "DisableProfiler": False}
FRAMEWORK_PROFILING = {"ProfilingIntervalInMilliseconds": 500, "ProfilingParameters": {
    "ProfilerEnabled": "True", "DetailedProfilingConfig": '{"StartStep": 5, "NumSteps": 3}',
    "DataloaderProfilingConfig": '{"StartStep": 5, "NumSteps": 3}'}}


def test_sdk_v2s_default_hook_says_nothing_is_saved_and_how_to_leave_it_out():
    (note,) = notes({HOOK_FILE: SDK_V2_DEFAULT_HOOK})
    assert note == ("SageMaker Debugger hook configuration found (debughookconfig.json, S3OutputPath "
                    "s3://bucket/job/output): this image has no smdebug, so no tensors are saved and nothing is "
                    "uploaded for it. SDK v2 adds it to every job: pass debugger_hook_config=False to the Estimator "
                    "to leave it out")


def test_the_default_profiler_is_system_monitoring_which_works():
    (note,) = notes({PROFILER_FILE: SDK_V2_DEFAULT_PROFILER})
    assert "system monitoring is SageMaker's own, outside the container, and works" in note
    assert note.endswith("pass disable_profiler=True to the Estimator to leave it out")


def test_framework_profiling_asked_for_collects_nothing_and_says_what_to_use_instead():
    (note,) = notes({PROFILER_FILE: FRAMEWORK_PROFILING})
    assert note.startswith("SageMaker Profiler: framework profiling asked for (DataloaderProfilingConfig, "
                           "DetailedProfilingConfig) needs smdebug, which this image does not include: nothing is "
                           "collected. Instead, for Horovod's own trace of every collective set horovod_timeline: true")


def test_read_configs_from_the_config_directory(tmp_path):
    assert read_configs(tmp_path) == {} and notes({}) == []
    (tmp_path / HOOK_FILE).write_text(json.dumps(SDK_V2_DEFAULT_HOOK))
    (tmp_path / PROFILER_FILE).write_text("not json")
    configs = read_configs(tmp_path)
    assert configs[HOOK_FILE] == SDK_V2_DEFAULT_HOOK and isinstance(configs[PROFILER_FILE], ValueError)
    assert notes(configs)[1].startswith("SageMaker Profiler: profilerconfig.json cannot be read (Expecting value")

"""config.py: the hook configuration's shape as SDK v2 builds it (tests/fixtures/debugger, made by the real SDK:
tests/sdk/test_sdk_debugger.py keeps them true) and what cannot be used, each with its reason."""

import json
from pathlib import Path

import pytest
from sagemaker_mxnet_debugger.config import (
    HookConfigProblem,
    hook_config_path,
    load_hook_config,
    parse_hook_config,
    profiler_requests,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "debugger"


def fixture(name):
    return json.loads((FIXTURES / name).read_text())


def test_sdk_v2s_default_hook_saves_losses_every_500_steps_from_rank_0():
    config = parse_hook_config(fixture("sdk-v2-default.debughookconfig.json"))
    assert config.describe() == ("collections losses (smdebug's default); every 500 steps; saved by rank 0 "
                                 "(include_workers one) to /opt/ml/output/tensors, which SageMaker uploads to "
                                 "s3://bucket/job/output")


def test_collections_and_hook_parameters_as_users_pass_them():
    config = parse_hook_config(fixture("sdk-v2-collections.debughookconfig.json"))
    assert config.collections == ("gradients", "losses", "weights")
    assert (config.save_interval, config.all_workers) == ("2", True)


def test_the_collections_rules_add():
    assert parse_hook_config(fixture("sdk-v2-rules.debughookconfig.json")).collections == ("gradients", "losses")


@pytest.mark.parametrize("raw, reason", [
    ([], "not a JSON object but list"),
    ({"S3OutputPath": "s3://b", "Version": 2}, "unknown key(s) Version: not the DebugHookConfig this image knows "
                                               "(S3OutputPath, LocalPath, HookParameters, CollectionConfigurations), "
                                               "perhaps a newer version of it"),
    ({"LocalPath": "tensors"}, "LocalPath 'tensors' is not an absolute path in the container"),
    ({"LocalPath": 3}, "LocalPath is not a path: 3"),
    ({"HookParameters": ["save_interval", "2"]}, "HookParameters is not a map of strings"),
    ({"HookParameters": {"save_interval": "often"}}, "HookParameters save_interval='often' is not a whole number"),
    ({"HookParameters": {"train.save_interval": "-1"}}, "HookParameters train.save_interval='-1' is not a whole"),
    ({"HookParameters": {"save_interval": "0"}}, "HookParameters save_interval=0: smdebug needs at least 1"),
    ({"HookParameters": {"save_steps": "1,x"}}, "HookParameters save_steps='1,x' is not a comma-separated list"),
    ({"HookParameters": {"include_workers": "some"}}, "HookParameters include_workers='some': smdebug knows 'one' and 'all'"),
    ({"CollectionConfigurations": {"CollectionName": "losses"}}, "CollectionConfigurations is not a list"),
    ({"CollectionConfigurations": [{"CollectionParameters": {}}]}, "CollectionConfigurations[0] has no CollectionName"),
    ({"CollectionConfigurations": [{"CollectionName": "losses", "Extra": 1}]},
     "CollectionConfigurations[0] has unknown key(s) Extra"),
    ({"CollectionConfigurations": [{"CollectionName": "weights", "CollectionParameters": {"end_step": "x"}}]},
     "CollectionConfigurations[0] (weights) end_step='x' is not a whole number"),
])
def test_what_cannot_be_used_says_why(raw, reason):
    with pytest.raises(HookConfigProblem) as problem:
        parse_hook_config(raw)
    assert str(problem.value).startswith(reason)


def test_load_absent_malformed_and_good_files(tmp_path):
    path = tmp_path / "debughookconfig.json"
    assert load_hook_config(path) is None
    path.write_text("{cut short")
    with pytest.raises(HookConfigProblem, match=r"^is not valid JSON \(Expecting property name"):
        load_hook_config(path)
    path.write_text(json.dumps({"LocalPath": "/tmp/t", "HookParameters": {"save_interval": 3}}))
    assert load_hook_config(path).save_interval == "3"


def test_smdebugs_variable_names_another_file(tmp_path):
    assert hook_config_path({}) == Path("/opt/ml/input/config/debughookconfig.json")
    assert hook_config_path({"SMDEBUG_CONFIG_FILE_PATH": "/x/hook.json"}) == Path("/x/hook.json")
    assert hook_config_path({}, tmp_path) == tmp_path / "debughookconfig.json"


def test_profiler_requests():
    assert profiler_requests(fixture("sdk-v2-default.profilerconfig.json")) == ()
    assert profiler_requests(fixture("sdk-v2-framework-profile.profilerconfig.json")) == (
        "DataloaderProfilingConfig", "DetailedProfilingConfig", "HorovodProfilingConfig", "PythonProfilingConfig",
        "SMDataParallelProfilingConfig")
    assert profiler_requests({"DisableProfiler": True, "ProfilingParameters": {"PythonProfilingConfig": "{}"}}) == ()
    assert profiler_requests("junk") == ()

"""launch_rules: what a built-in program declares next to its code, loaded by file path (standard library only,
sys.path untouched), and which declared rule the job's arguments switch on."""

import ast
import sys
from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.core.exits import ConfigError, PlanError
from sagemaker_mxnet_horovod.parse.launch_rules import (
    LAUNCH_MODULES,
    LaunchRules,
    ParameterServerRequest,
    SingleProcessRequest,
    load_launch_rules,
    parameter_server_request,
    single_process_request,
)
from unit_helpers import unit_paths

ENTRYPOINTS = unit_paths.ENTRYPOINTS
KVSTORE_SINGLE = {"local", "device"}


def test_a_program_without_a_launch_module_gets_none():
    for name in (None, "resnet"):
        rules = load_launch_rules(name, "/nonexistent")  # not even looked for
        assert rules.environment(name, 8) == [] and dict(rules.single_process_when_false) == {}
        assert dict(rules.parameter_server_when) == {} and dict(rules.single_process_when) == {}
        assert rules.loader_workers is None


@pytest.mark.parametrize("program", ["mnist", "faster_rcnn", "mask_rcnn"])
def test_every_builtin_program_declares_its_kvstore(program):
    # The skeleton's shared module: dist_* runs the parameter servers, local/device one process.
    rules = load_launch_rules(program, str(ENTRYPOINTS))
    assert dict(rules.parameter_server_when) == {"kvstore": ("dist_sync", "dist_device_sync", "dist_async")}
    assert set(rules.single_process_when["kvstore"]) == KVSTORE_SINGLE
    assert "local kvstore" in rules.single_process_when["kvstore"]["local"]


# What GluonCV's scripts set on import, read in dmlc/gluon-cv at 1ff5446 (scripts/detection/faster_rcnn/
# train_faster_rcnn.py lines 6-12, scripts/instance/mask_rcnn/train_mask_rcnn.py lines 6-13).
GLUONCV_ENVIRONMENT = {
    "faster_rcnn": {"MXNET_CUDNN_AUTOTUNE_DEFAULT": "0", "MXNET_GPU_MEM_POOL_TYPE": "Round",
                    "MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF": "26", "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD": "999",
                    "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD": "25", "MXNET_GPU_COPY_NTHREADS": "1",
                    "MXNET_OPTIMIZER_AGGREGATION_SIZE": "54"},
    "mask_rcnn": {"MXNET_CUDNN_AUTOTUNE_DEFAULT": "0", "MXNET_GPU_MEM_POOL_TYPE": "Round",
                  "MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF": "28", "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD": "999",
                  "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD": "25", "MXNET_GPU_COPY_NTHREADS": "1",
                  "MXNET_OPTIMIZER_AGGREGATION_SIZE": "54", "MXNET_USE_FUSION": "0"},
}


@pytest.mark.parametrize("program", ["faster_rcnn", "mask_rcnn"])
def test_rcnn_launch_rules(program):
    rules = load_launch_rules(program, str(ENTRYPOINTS))
    gpu = rules.environment(program, 8)
    assert {name: value for name, value, _ in gpu} == GLUONCV_ENVIRONMENT[program]
    assert len(gpu) == len(GLUONCV_ENVIRONMENT[program])
    assert {why for _, _, why in gpu} == {f"GluonCV's train_{program}.py on GPUs"}
    assert rules.environment(program, 0) == []  # CPU hosts keep MXNet's defaults
    assert dict(rules.single_process_when_false) == {"horovod": "one process over all devices with MXNet's kvstore"}
    argument, default = rules.loader_workers
    assert argument == "num-workers"
    assert default(gpu_count=0, ranks_per_host=2, cores=2) == 4  # CPU hosts: 4 per rank
    assert default(gpu_count=8, ranks_per_host=8, cores=96) == 11  # p3dn/p4d: a rank's 12 cores but its own


def test_every_builtin_launch_module_exists_and_is_standard_library_only():
    # Loaded by file path into the launcher (stdlib only, starts in milliseconds): no relative imports, nothing
    # heavy, no imports of the launcher or of the programs' own modules.
    for relative in {module for modules in LAUNCH_MODULES.values() for module in modules}:
        tree = ast.parse((ENTRYPOINTS / relative).read_text())
        imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        imported += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert all(name and name.split(".")[0] in sys.stdlib_module_names for name in imported), (relative, imported)


def test_loading_by_path_leaves_sys_path_and_sys_modules_alone():
    path, modules = list(sys.path), set(sys.modules)
    load_launch_rules("mask_rcnn", str(ENTRYPOINTS))
    assert sys.path == path and set(sys.modules) == modules


def write_launch_module(entrypoints: Path, text: str, shared: str = "") -> None:
    """mask_rcnn's launch modules: the shared one (`shared`) and its own (`text`)."""
    for relative, content in zip(LAUNCH_MODULES["mask_rcnn"], (shared, text), strict=True):
        module = entrypoints / relative
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(content)


def test_a_launch_module_declares_only_what_it_needs(tmp_path):
    write_launch_module(tmp_path, 'SINGLE_PROCESS_WHEN_FALSE = {"distributed": "one process"}\n')
    rules = load_launch_rules("mask_rcnn", str(tmp_path))
    assert rules.environment("mask_rcnn", 8) == []
    assert dict(rules.single_process_when_false) == {"distributed": "one process"}
    write_launch_module(tmp_path / "env", 'def environment(program, gpu_count):\n    return [("X", "1", "why")]\n')
    rules = load_launch_rules("mask_rcnn", str(tmp_path / "env"))
    assert rules.environment("mask_rcnn", 0) == [("X", "1", "why")] and dict(rules.single_process_when_false) == {}


def test_a_later_module_adds_to_the_earlier_ones(tmp_path):
    write_launch_module(tmp_path, 'def environment(program, gpu_count):\n    return [("B", "2", "own")]\n'
                        'SINGLE_PROCESS_WHEN = {"mode": {"solo": "alone"}}\n',
                        shared='def environment(program, gpu_count):\n    return [("A", "1", "shared")]\n'
                        'PARAMETER_SERVER_WHEN = {"kvstore": ["dist_sync"]}\n')
    rules = load_launch_rules("mask_rcnn", str(tmp_path))
    assert rules.environment("mask_rcnn", 0) == [("A", "1", "shared"), ("B", "2", "own")]
    assert dict(rules.parameter_server_when) == {"kvstore": ("dist_sync",)}
    assert dict(rules.single_process_when["mode"]) == {"solo": "alone"}


def test_a_missing_or_broken_launch_module_is_a_plan_error_naming_it(tmp_path):
    with pytest.raises(PlanError, match=f"the launch rules of mask_rcnn are missing: no {tmp_path}/mxnet_programs"):
        load_launch_rules("mask_rcnn", str(tmp_path))
    write_launch_module(tmp_path, "import mxnet_programs.rcnn.nothing_here\n")
    with pytest.raises(PlanError, match="the launch rules of mask_rcnn in .*launch.py cannot be loaded: "
                                        "ModuleNotFoundError"):
        load_launch_rules("mask_rcnn", str(tmp_path))


def test_an_argument_set_false_switches_its_single_process_rule_on():
    rules = LaunchRules(single_process_when_false={"horovod": "one process"})
    assert single_process_request(rules, {"horovod": "False"}) == SingleProcessRequest("horovod", "one process")
    assert single_process_request(rules, {"horovod": "0"}) == SingleProcessRequest("horovod", "one process")
    assert single_process_request(rules, {"horovod": "true"}) is None
    assert single_process_request(rules, {"epochs": "3"}) is None
    assert single_process_request(LaunchRules(), {"horovod": "false"}) is None  # a user script: nothing declared
    with pytest.raises(ConfigError, match="hyperparameter horovod='maybe' is not a boolean"):
        single_process_request(rules, {"horovod": "maybe"})


def test_an_argument_set_to_a_declared_value_switches_its_single_process_rule_on():
    rules = LaunchRules(single_process_when={"kvstore": {"local": "one process"}})
    request = single_process_request(rules, {"kvstore": "local"})
    assert request == SingleProcessRequest("kvstore", "one process", "local") and request.setting == "kvstore=local"
    assert single_process_request(rules, {"kvstore": "dist_sync"}) is None
    assert single_process_request(rules, {}) is None


def test_the_parameter_server_argument_is_reported_whatever_its_value():
    rules = LaunchRules(parameter_server_when={"kvstore": ("dist_sync", "dist_async")})
    asks = parameter_server_request(rules, {"kvstore": "dist_async"})
    assert asks == ParameterServerRequest("kvstore", "dist_async", ("dist_sync", "dist_async")) and asks.asks
    other = parameter_server_request(rules, {"kvstore": "horovod"})
    assert not other.asks and other.setting == "kvstore=horovod"  # the layout refuses it with the parameter server
    assert parameter_server_request(rules, {"epochs": "1"}) is None
    assert parameter_server_request(LaunchRules(), {"kvstore": "dist_sync"}) is None  # a user script's own argument

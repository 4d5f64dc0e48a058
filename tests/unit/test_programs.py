"""programs: the program each rank runs, and the launch rules a built-in program declares next to its code."""

import ast
import sys
from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.config import Paths, parse_training_config
from sagemaker_mxnet_horovod.programs import (
    LAUNCH_MODULES,
    PlanError,
    load_launch_rules,
    program_name_of,
    resolve_program,
)

PATHS = Paths(Path("/opt/ml"))
ENTRYPOINTS = Path(__file__).resolve().parents[2] / "entrypoints"


def config(**hps):
    return parse_training_config(PATHS, None, hps, None, {})


# --- resolve_program --------------------------------------------------------------------------------------

def test_builtin_program_runs_from_the_entrypoints_directory_with_toolkit_style_arguments():
    program = resolve_program(config(sagemaker_program="mnist", epochs="3", b="1"), "python", "/opt/entrypoints")
    assert program.builtin and program.name == "mnist" and program.submit_directory is None
    assert program.argv == ("python", "/opt/entrypoints/mnist.py", "-b", "1", "--epochs", "3")  # keys sorted


def test_unknown_program():
    with pytest.raises(PlanError, match="unknown program 'resnet': use one of mnist, faster_rcnn, mask_rcnn"):
        resolve_program(config(sagemaker_program="resnet"), "python", "/opt/entrypoints")


def test_no_program():
    with pytest.raises(PlanError, match="no program to run"):
        resolve_program(config(), "python", "/opt/entrypoints")


# As the toolkit's sagemaker_training._entry_point_type: .sh is a command; else a setup.py makes a package
# (python -m); else .py is a script; else a command. Commands run through sh from the code directory (the
# rank's working directory), so their #! line chooses the interpreter.
RUN_COMMAND = ("/bin/sh", "-c", './"$0" "$@"')


@pytest.mark.parametrize("name,package,kind,argv", [
    ('"train.py"', False, "script", ("python", "/opt/ml/code/train.py", "--epochs", "1")),
    ("sub/train.py", False, "script", ("python", "/opt/ml/code/sub/train.py", "--epochs", "1")),
    ("run.sh", False, "command", (*RUN_COMMAND, "run.sh", "--epochs", "1")),
    ("bin/run.sh", False, "command", (*RUN_COMMAND, "bin/run.sh", "--epochs", "1")),
    ("trainer", False, "command", (*RUN_COMMAND, "trainer", "--epochs", "1")),
    ("train.py", True, "package", ("python", "-m", "train", "--epochs", "1")),
    ("trainer", True, "package", ("python", "-m", "trainer", "--epochs", "1")),
    ("run.sh", True, "command", (*RUN_COMMAND, "run.sh", "--epochs", "1")),
])
def test_user_entry_point_from_submit_directory(name, package, kind, argv):
    cfg = config(sagemaker_program=name, sagemaker_submit_directory='"s3://bucket/src/sourcedir.tar.gz"', epochs="1")
    program = resolve_program(cfg, "python", "/opt/entrypoints", code_is_package=package)
    assert not program.builtin and program.submit_directory == "s3://bucket/src/sourcedir.tar.gz"
    assert program.code_dir == "/opt/ml/code" and (program.kind, program.argv) == (kind, argv)


def test_a_builtin_program_ignores_a_setup_py_in_the_code_directory():
    program = resolve_program(config(sagemaker_program="mnist"), "python", "/opt/entrypoints", code_is_package=True)
    assert program.argv == ("python", "/opt/entrypoints/mnist.py")


@pytest.mark.parametrize("name", ["/etc/passwd", "../escape.py", "a/../../b.py"])
def test_user_script_must_stay_inside_submit_directory(name):
    with pytest.raises(PlanError, match="must be a path inside sagemaker_submit_directory"):
        resolve_program(config(sagemaker_program=name, sagemaker_submit_directory="/x"), "python", "/e")


def test_program_name_of_is_the_builtin_programs_name_only():
    assert program_name_of(config(sagemaker_program="mask_rcnn")) == "mask_rcnn"
    assert program_name_of(config(sagemaker_program="mask_rcnn", sagemaker_submit_directory="/x")) is None
    assert program_name_of(config()) is None


# --- launch rules -----------------------------------------------------------------------------------------

def test_a_program_without_a_launch_module_gets_none():
    for name in ("mnist", None, "resnet"):
        rules = load_launch_rules(name, "/nonexistent")  # not even looked for
        assert rules.environment(name, 8) == [] and dict(rules.single_process_when_false) == {}


@pytest.mark.parametrize("program", ["faster_rcnn", "mask_rcnn"])
def test_rcnn_launch_rules(program):
    rules = load_launch_rules(program, str(ENTRYPOINTS))
    gpu = rules.environment(program, 8)
    assert ("MXNET_GPU_MEM_POOL_TYPE", "Round", f"tuned for {program} on GPUs") in gpu
    assert {name for name, _, _ in gpu} == {
        "MXNET_GPU_MEM_POOL_TYPE", "MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF", "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD",
        "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD", "MXNET_GPU_COPY_NTHREADS", "MXNET_OPTIMIZER_AGGREGATION_SIZE",
        "MXNET_CUDNN_AUTOTUNE_DEFAULT"}
    assert rules.environment(program, 0) == []  # CPU hosts keep MXNet's defaults
    assert dict(rules.single_process_when_false) == {"horovod": "one process over all devices with MXNet's kvstore"}


def test_every_builtin_launch_module_exists_and_is_standard_library_only():
    # Loaded by file path into the launcher (stdlib only, starts in milliseconds): no relative imports, nothing
    # heavy, no imports of the launcher or of the programs' own modules.
    for relative in set(LAUNCH_MODULES.values()):
        tree = ast.parse((ENTRYPOINTS / relative).read_text())
        imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        imported += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert all(name and name.split(".")[0] in sys.stdlib_module_names for name in imported), (relative, imported)


def test_loading_by_path_leaves_sys_path_and_sys_modules_alone():
    path, modules = list(sys.path), set(sys.modules)
    load_launch_rules("mask_rcnn", str(ENTRYPOINTS))
    assert sys.path == path and set(sys.modules) == modules


def write_launch_module(entrypoints: Path, text: str) -> None:
    module = entrypoints / LAUNCH_MODULES["mask_rcnn"]
    module.parent.mkdir(parents=True)
    module.write_text(text)


def test_a_launch_module_declares_only_what_it_needs(tmp_path):
    write_launch_module(tmp_path, 'SINGLE_PROCESS_WHEN_FALSE = {"distributed": "one process"}\n')
    rules = load_launch_rules("mask_rcnn", str(tmp_path))
    assert rules.environment("mask_rcnn", 8) == []
    assert dict(rules.single_process_when_false) == {"distributed": "one process"}
    write_launch_module(tmp_path / "env", 'def environment(program, gpu_count):\n    return [("X", "1", "why")]\n')
    rules = load_launch_rules("mask_rcnn", str(tmp_path / "env"))
    assert rules.environment("mask_rcnn", 0) == [("X", "1", "why")] and dict(rules.single_process_when_false) == {}


def test_a_missing_or_broken_launch_module_is_a_plan_error_naming_it(tmp_path):
    with pytest.raises(PlanError, match=f"the launch rules of mask_rcnn are missing: no {tmp_path}/mxnet_programs"):
        load_launch_rules("mask_rcnn", str(tmp_path))
    write_launch_module(tmp_path, "import mxnet_programs.rcnn.nothing_here\n")
    with pytest.raises(PlanError, match="the launch rules of mask_rcnn in .*launch.py cannot be loaded: "
                                        "ModuleNotFoundError"):
        load_launch_rules("mask_rcnn", str(tmp_path))

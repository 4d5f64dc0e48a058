"""programs: the program each rank runs, a built-in one or the user's entry point, as the toolkit runs it."""

from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.core.exits import PlanError
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import parse_training_config
from sagemaker_mxnet_horovod.plan.programs import resolve_program
from unit_helpers import unit_paths

PATHS = Paths(Path("/opt/ml"))

ENTRYPOINTS = str(unit_paths.ENTRYPOINTS)  # the built-in programs and their launch rules


def config(**hps):
    return parse_training_config(PATHS, None, hps, None, {}, entrypoints_dir=ENTRYPOINTS)


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

"""prepare.py: the host readied on the real file system, whatever its backend: the job's directories, the user's
entry point found in the code directory (a missing one named with what is there; a command made executable). Fetching and pip-installing the user's code use the toolkit's own
functions, in the image: tests/integration/test_entry_point_kinds.py, tests/sdk."""

import os

import pytest
from sagemaker_mxnet_horovod.act.prepare import is_python_package, prepare_host
from sagemaker_mxnet_horovod.backends.registry import plan_job
from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import parse_training_config
from unit_helpers import unit_paths

CPU2 = HostFacts(cpu_count=2, interfaces=("eth0",), default_route_interface="eth0")

ENTRYPOINTS = str(unit_paths.ENTRYPOINTS)  # the built-in programs and their launch rules


def planned(tmp_path, hps, hosts=("algo-1",)):
    paths = Paths(tmp_path / "ml")
    config = parse_training_config(paths, {"current_host": "algo-1", "hosts": list(hosts)}, hps, None, {},
                                   entrypoints_dir=ENTRYPOINTS)
    return paths, plan_job(config, CPU2, {"PATH": "/usr/bin", "SECRET": "s"}, run_dir=str(tmp_path / "run"))


def no_replan():
    raise AssertionError("planned again although the code's kind did not change")


def test_the_jobs_directories_are_made_and_a_builtin_program_needs_nothing_more(tmp_path):
    paths, plan = planned(tmp_path, {"sagemaker_program": "mnist"}, hosts=("algo-1", "algo-2"))
    assert prepare_host(plan, paths, no_replan, print) is plan
    assert all(d.is_dir() for d in (paths.model_dir, paths.output_data_dir, paths.code_dir, tmp_path / "run"))
    assert not (tmp_path / "run" / "rank-env.json").exists()  # MPI's ranks' environment is the MPI backend's


def test_a_user_script_missing_from_the_code_directory_is_named_with_what_is_there(tmp_path):
    code = tmp_path / "ml" / "code"
    code.mkdir(parents=True)
    (code / "train_v2.py").write_text("")
    paths, plan = planned(tmp_path, {"sagemaker_program": "train.py", "sagemaker_submit_directory": str(code)})
    with pytest.raises(ConfigError, match=r"sagemaker_program 'train.py' is not in sagemaker_submit_directory "
                                          r".*/ml/code \(contents: \['train_v2.py'\]\)"):
        prepare_host(plan, paths, no_replan, print)


def test_a_command_entry_point_is_made_executable_as_the_toolkit_does(tmp_path):
    code = tmp_path / "ml" / "code"
    code.mkdir(parents=True)
    (code / "run.sh").write_text("#!/bin/sh\necho hi\n")
    paths, plan = planned(tmp_path, {"sagemaker_program": "run.sh", "sagemaker_submit_directory": str(code)})
    assert plan.program.kind == "command"
    prepare_host(plan, paths, no_replan, print)
    assert os.access(code / "run.sh", os.X_OK)


def test_a_setup_py_makes_the_code_a_python_package(tmp_path):
    assert not is_python_package(tmp_path)
    (tmp_path / "setup.py").write_text("")
    assert is_python_package(tmp_path)

"""rank_program.py: how every backend's rank runs its program, as a real process: the code directory as working
directory (a missing one stops it with the reason), a Python script run in the same interpreter with line-buffered
output, anything else exec'd in place, a failed parameter-server worker ended at once; the environment the launcher
gives every rank (rank_environment). The progress watch it starts: test_progress.py; the MPI backend's start before
it: backends/mpi/test_rank_env.py."""

import json
import sys

from sagemaker_mxnet_horovod.act.rank_program import rank_environment
from unit_helpers.plan_cases import config, plan
from unit_helpers.rank_starts import RANK_PROGRAM, start_rank


def run_rank(run_dir, workdir, *program, env=None):
    return start_rank(RANK_PROGRAM, run_dir, workdir, *program, env=env)


def test_the_program_starts_in_the_code_directory_and_a_missing_one_is_said(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "data.txt").write_text("next to the script")
    (code / "train.py").write_text("import json, os, sys\nprint(json.dumps([os.getcwd(), open('data.txt').read(), "
                                   "sys.argv[1:]]))\n")
    process, stdout, stderr = run_rank(tmp_path, code, "--", sys.executable, str(code / "train.py"), "--flag", "True")
    assert process.returncode == 0 and json.loads(stdout) == [str(code), "next to the script", ["--flag", "True"]], stderr
    process, _, stderr = run_rank(tmp_path, tmp_path / "nope", "--", "true")
    assert process.returncode == 1 and "cannot start the program in" in stderr


def test_a_python_script_runs_in_this_process_as_main_next_to_its_modules_with_line_buffered_output(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "helper.py").write_text("WHERE = 'next to the script'\n")
    (code / "train.py").write_text(
        "import json, os, sys\nimport helper\n"
        "print(json.dumps([__name__, helper.WHERE, os.getpid(), sys.stdout.line_buffering, "
        "sys.stderr.line_buffering, sys.argv]))\n")
    process, stdout, stderr = run_rank(tmp_path, code, "--", sys.executable, str(code / "train.py"), "--lr", "0.1")
    # Line-buffered: mpirun tags whole lines, so a metric line is never cut by a tag; one process: the rank
    # mpirun started is the program, and signals reach it.
    assert json.loads(stdout) == ["__main__", "next to the script", process.pid, True, True,
                                  [str(code / "train.py"), "--lr", "0.1"]], stderr


def test_any_other_program_is_execd_in_place_in_the_working_directory(tmp_path):
    process, stdout, stderr = run_rank(tmp_path, tmp_path, "--", "/bin/sh", "-c", 'echo "$$ $SM_CURRENT_HOST $PWD"',
                                       env={"SM_CURRENT_HOST": "algo-2"})
    assert stdout.split() == [str(process.pid), "algo-2", str(tmp_path)], stderr


def test_a_command_line_without_the_separator_is_refused_with_the_usage(tmp_path):
    process, _, stderr = run_rank(tmp_path, tmp_path, "true")
    assert process.returncode == 1
    assert stderr.startswith("usage: python -m sagemaker_mxnet_horovod.act.rank_program RUN_DIR WORKDIR -- PROGRAM")


def test_a_failed_parameter_server_worker_ends_now_not_at_the_interpreters_shutdown(tmp_path):
    # An exit handler stands for MXNet's kvstore waiting in ps-lite's barrier at exit: it would block forever.
    code = tmp_path / "code"
    code.mkdir()
    blocked_at_exit = "import atexit, time\natexit.register(lambda: time.sleep(60))\n"
    (code / "raises.py").write_text(blocked_at_exit + "raise ValueError('bad batch')\n")
    (code / "exits.py").write_text(blocked_at_exit + "import sys\nsys.exit('mnist: error: no data')\n")
    (code / "done.py").write_text("import atexit\natexit.register(lambda: print('exit handler ran'))\n")
    worker = {"DMLC_ROLE": "worker"}
    process, _, stderr = run_rank(tmp_path, code, "--", sys.executable, str(code / "raises.py"), env=worker)
    assert process.returncode == 1 and stderr.splitlines()[-1] == "ValueError: bad batch"
    assert stderr.splitlines()[0] == "Traceback (most recent call last):"
    process, _, stderr = run_rank(tmp_path, code, "--", sys.executable, str(code / "exits.py"), env=worker)
    assert (process.returncode, stderr.strip()) == (1, "mnist: error: no data")
    process, stdout, stderr = run_rank(tmp_path, code, "--", sys.executable, str(code / "done.py"), env=worker)
    assert (process.returncode, stdout.strip()) == (0, "exit handler ran")  # a worker that succeeds exits as usual
    # ... saying first that its script returned: the launcher's watch of workers that finish apart starts there.
    assert stderr.splitlines() == ["train: the script returned; waiting in ps-lite's barrier at exit for every "
                                   "other worker"]


def test_rank_environment_is_this_containers_own_plus_defaults_and_sm():
    container_env = {"PATH": "/opt/venv/bin", "MY_SETTING": "x", "OMPI_MCA_btl": "tcp", "OMP_NUM_THREADS": "3"}
    worker = plan(config(current="algo-2"), env=container_env)
    env = rank_environment(worker, container_env)
    assert env["MY_SETTING"] == "x"  # the job's `environment`, as this container got it
    assert env["SM_CURRENT_HOST"] == "algo-2"
    assert env["OMP_NUM_THREADS"] == "3"  # the user's value wins
    assert "OMPI_MCA_btl" not in env  # Open MPI's own variables stay as mpirun set them per rank

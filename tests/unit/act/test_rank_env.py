"""rank_env.py: how every rank starts, as a real process: this host's environment from RUN_DIR/rank-env.json
(never Open MPI's own variables), the code directory as working directory, a Python script run in the same
interpreter with line-buffered output, anything else exec'd in place; the environment the launcher gives them
(rank_environment). The progress watch it starts:
test_progress.py."""

import json
import os
import subprocess
import sys

from sagemaker_mxnet_horovod.act.rank_env import rank_environment
from unit_helpers import unit_paths
from unit_helpers.plan_cases import config, plan

SRC = unit_paths.SRC


def run_rank(run_dir, workdir, *program, env=None):
    """`python -m sagemaker_mxnet_horovod.act.rank_env RUN_DIR WORKDIR -- PROGRAM...` as mpirun starts it: started
    elsewhere (cwd /), with the exported environment `env`. Returns the process and its output."""
    process = subprocess.Popen([sys.executable, "-m", "sagemaker_mxnet_horovod.act.rank_env", str(run_dir), str(workdir),
                                *program], cwd="/", env={**os.environ, "PYTHONPATH": str(SRC), **(env or {})},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.communicate(timeout=60)
    return process, stdout, stderr


def test_rank_env_applies_this_hosts_environment_and_working_directory(tmp_path):
    run_dir, code = tmp_path / "run", tmp_path / "code"
    run_dir.mkdir()
    code.mkdir()
    (run_dir / "rank-env.json").write_text(json.dumps({"SM_CURRENT_HOST": "algo-2", "OMPI_COMM_WORLD_RANK": "9"}))
    (code / "data.txt").write_text("next to the script")
    (code / "train.py").write_text("import json, os, sys\nprint(json.dumps([os.getcwd(), open('data.txt').read(), "
                                   "os.environ['SM_CURRENT_HOST'], os.environ.get('OMPI_COMM_WORLD_RANK'), "
                                   "sys.argv[1:]]))\n")
    done = subprocess.run([sys.executable, "-m", "sagemaker_mxnet_horovod.act.rank_env", str(run_dir), str(code), "--",
                           sys.executable, str(code / "train.py"), "--flag", "True"], cwd="/",
                          env={**os.environ, "PYTHONPATH": str(SRC), "OMPI_COMM_WORLD_RANK": "1"},
                          capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [str(code), "next to the script", "algo-2", "1", ["--flag", "True"]]
    missing = subprocess.run([sys.executable, "-m", "sagemaker_mxnet_horovod.act.rank_env", str(run_dir),
                              str(tmp_path / "nope"), "--", "true"], env={**os.environ, "PYTHONPATH": str(SRC)},
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "cannot start the program in" in missing.stderr


def test_open_mpis_own_variables_are_never_taken_from_the_file(tmp_path):
    # The master's launcher wrote the file from its own environment: Open MPI's per-rank variables in it would
    # be the master's, not this rank's.
    written = {"OMPI_COMM_WORLD_LOCAL_RANK": "0", "PMIX_RANK": "0", "OPAL_PREFIX": "/master", "ORTE_X": "master",
               "SM_CURRENT_HOST": "algo-2", "MY_SETTING": "from the job's environment"}
    (tmp_path / "rank-env.json").write_text(json.dumps(written))
    exported = {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "PMIX_RANK": "3", "OPAL_PREFIX": "/rank", "SM_CURRENT_HOST": "algo-1"}
    names = [*written, "ORTE_X"]
    script = tmp_path / "env.py"
    script.write_text(f"import json, os\nprint(json.dumps({{n: os.environ.get(n) for n in {names!r}}}))\n")
    _, stdout, stderr = run_rank(tmp_path, tmp_path, "--", sys.executable, str(script), env=exported)
    assert json.loads(stdout) == {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "PMIX_RANK": "3", "OPAL_PREFIX": "/rank",
                                  "ORTE_X": None, "SM_CURRENT_HOST": "algo-2",
                                  "MY_SETTING": "from the job's environment"}, stderr


def test_without_the_file_the_exported_environment_is_all_there_is(tmp_path):
    # Plain mpirun, not the launcher: nothing written, nothing applied, the program still starts.
    _, stdout, stderr = run_rank(tmp_path, tmp_path, "--", "/bin/sh", "-c", 'echo "$SM_CURRENT_HOST"',
                                 env={"SM_CURRENT_HOST": "algo-1"})
    assert stdout == "algo-1\n", stderr


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
    (tmp_path / "rank-env.json").write_text(json.dumps({"SM_CURRENT_HOST": "algo-2"}))
    process, stdout, stderr = run_rank(tmp_path, tmp_path, "--", "/bin/sh", "-c", 'echo "$$ $SM_CURRENT_HOST $PWD"')
    assert stdout.split() == [str(process.pid), "algo-2", str(tmp_path)], stderr


def test_a_command_line_without_the_separator_is_refused_with_the_usage(tmp_path):
    process, _, stderr = run_rank(tmp_path, tmp_path, "true")
    assert process.returncode == 1
    assert stderr.startswith("usage: python -m sagemaker_mxnet_horovod.act.rank_env RUN_DIR WORKDIR -- PROGRAM")


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


GLOO_NAMES = ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
              "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME")


def open_mpi_rank(rank, size, local_rank, local_size):
    return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(size),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(local_rank), "OMPI_COMM_WORLD_LOCAL_SIZE": str(local_size)}


def gloo_variables_seen(tmp_path, written, exported):
    (tmp_path / "rank-env.json").write_text(json.dumps(written))
    script = tmp_path / "env.py"
    script.write_text(f"import json, os\nprint(json.dumps({{n: os.environ.get(n) for n in {GLOO_NAMES!r}}}))\n")
    process, stdout, stderr = run_rank(tmp_path, tmp_path, "--", sys.executable, str(script), env=exported)
    return process.returncode, stdout, stderr


def test_a_gloo_rank_gets_its_own_horovod_numbers_from_open_mpis(tmp_path):
    # Rank 3 of 2 hosts x 2 ranks: the second host's second rank. The controller comes from the host's file.
    code, stdout, stderr = gloo_variables_seen(tmp_path, {"HOROVOD_CONTROLLER": "GLOO", "HOROVOD_RANK": "0"},
                                               open_mpi_rank(3, 4, 1, 2))
    assert code == 0 and json.loads(stdout) == {
        "HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2",
        "HOROVOD_CROSS_RANK": "1", "HOROVOD_CROSS_SIZE": "2", "HOROVOD_HOSTNAME": "host-1"}, stderr


def test_without_gloo_a_rank_gets_no_horovod_numbers(tmp_path):
    code, stdout, stderr = gloo_variables_seen(tmp_path, {"HOROVOD_CPU_OPERATIONS": "gloo"}, open_mpi_rank(3, 4, 1, 2))
    assert code == 0 and json.loads(stdout) == dict.fromkeys(GLOO_NAMES), stderr


def test_a_gloo_rank_placed_otherwise_than_by_slot_stops_with_the_reason(tmp_path):
    code, stdout, stderr = gloo_variables_seen(tmp_path, {"HOROVOD_CONTROLLER": "gloo"}, open_mpi_rank(1, 4, 0, 2))
    assert code == 1 and stdout == ""
    assert "rank_env: Gloo under mpirun needs ranks placed by slot, 2 per host: rank 1 of 4" in stderr

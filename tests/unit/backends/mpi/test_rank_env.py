"""rank_env.py: how each of mpirun's ranks starts, as a real process: this host's environment from
RUN_DIR/rank-env.json (never Open MPI's own variables), Gloo's numbers from Open MPI's when the job runs Horovod over
Gloo, then the program as every backend's ranks run it (act/test_rank_program.py); starting costs a rank none of the
launcher's planning."""

import dataclasses
import json
import subprocess
import sys

from sagemaker_mxnet_horovod.backends.mpi.rank_env import write_rank_environment
from unit_helpers import unit_paths
from unit_helpers.plan_cases import config, options, plan
from unit_helpers.rank_starts import MPI_RANK_ENV, start_rank


def run_rank(run_dir, workdir, *program, env=None):
    return start_rank(MPI_RANK_ENV, run_dir, workdir, *program, env=env)


def write_file(run_dir, environment, gloo_rendezvous=None):
    """RUN_DIR/rank-env.json as write_rank_environment writes it (test_backend_run.py checks the writer)."""
    (run_dir / "rank-env.json").write_text(json.dumps({"environment": environment,
                                                       "gloo_rendezvous": gloo_rendezvous}))


def test_a_rank_applies_this_hosts_environment_then_runs_the_program_in_the_code_directory(tmp_path):
    run_dir, code = tmp_path / "run", tmp_path / "code"
    run_dir.mkdir()
    code.mkdir()
    write_file(run_dir, {"SM_CURRENT_HOST": "algo-2", "OMPI_COMM_WORLD_RANK": "9"})
    (code / "data.txt").write_text("next to the script")
    (code / "train.py").write_text("import json, os, sys\nprint(json.dumps([os.getcwd(), open('data.txt').read(), "
                                   "os.environ['SM_CURRENT_HOST'], os.environ.get('OMPI_COMM_WORLD_RANK'), "
                                   "sys.argv[1:], sys.stdout.line_buffering]))\n")
    process, stdout, stderr = run_rank(run_dir, code, "--", sys.executable, str(code / "train.py"), "--flag", "True",
                                       env={"OMPI_COMM_WORLD_RANK": "1"})
    assert json.loads(stdout) == [str(code), "next to the script", "algo-2", "1", ["--flag", "True"], True], stderr
    process, _, stderr = run_rank(run_dir, tmp_path / "nope", "--", "true")
    assert process.returncode == 1 and "cannot start the program in" in stderr
    process, _, stderr = run_rank(run_dir, code, "true")
    assert process.returncode == 1
    assert stderr.startswith("usage: python -m sagemaker_mxnet_horovod.backends.mpi.rank_env RUN_DIR WORKDIR -- PROGRAM")


def test_open_mpis_own_variables_are_never_taken_from_the_file(tmp_path):
    # The master's launcher wrote the file from its own environment: Open MPI's per-rank variables in it would
    # be the master's, not this rank's.
    written = {"OMPI_COMM_WORLD_LOCAL_RANK": "0", "PMIX_RANK": "0", "OPAL_PREFIX": "/master", "ORTE_X": "master",
               "SM_CURRENT_HOST": "algo-2", "MY_SETTING": "from the job's environment"}
    write_file(tmp_path, written)
    exported = {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "PMIX_RANK": "3", "OPAL_PREFIX": "/rank", "SM_CURRENT_HOST": "algo-1"}
    names = [*written, "ORTE_X"]
    script = tmp_path / "env.py"
    script.write_text(f"import json, os\nprint(json.dumps({{n: os.environ.get(n) for n in {names!r}}}))\n")
    _, stdout, stderr = run_rank(tmp_path, tmp_path, "--", sys.executable, str(script), env=exported)
    assert json.loads(stdout) == {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "PMIX_RANK": "3", "OPAL_PREFIX": "/rank",
                                  "ORTE_X": None, "SM_CURRENT_HOST": "algo-2",
                                  "MY_SETTING": "from the job's environment"}, stderr


def test_what_mpiruns_x_set_survives_this_hosts_file(tmp_path):
    # The job's environment says OMP_NUM_THREADS=2, -x says 3: mpirun gives the rank 3, and the file, written from
    # the plan, keeps it (the file once put the container's 2, or the launcher's default, back).
    container = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "2", "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": "/wp"}
    for current in ("algo-1", "algo-2"):
        planned = plan(config(options("-x OMP_NUM_THREADS=3 -x MXNET_HOME=/mine"), current=current), env=container)
        write_rank_environment(dataclasses.replace(planned, run_dir=str(tmp_path)), container)
        script = tmp_path / "env.py"
        script.write_text("import os\nprint(os.environ['OMP_NUM_THREADS'], os.environ['MXNET_HOME'])\n")
        _, stdout, stderr = run_rank(tmp_path, tmp_path, "--", sys.executable, str(script),
                                     env={"OMP_NUM_THREADS": "3", "MXNET_HOME": "/mine"})
        assert stdout.split() == ["3", "/mine"], stderr


def test_without_the_file_the_exported_environment_is_all_there_is(tmp_path):
    # Plain mpirun, not the launcher: nothing written, nothing applied, the program still starts.
    _, stdout, stderr = run_rank(tmp_path, tmp_path, "--", "/bin/sh", "-c", 'echo "$SM_CURRENT_HOST"',
                                 env={"SM_CURRENT_HOST": "algo-1"})
    assert stdout == "algo-1\n", stderr


GLOO_NAMES = ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
              "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME")


def open_mpi_rank(rank, size, local_rank, local_size):
    return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(size),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(local_rank), "OMPI_COMM_WORLD_LOCAL_SIZE": str(local_size)}


GLOO_2X2 = {"port": 7421, "bind_address": "172.18.0.2", "size": 4, "local_size": 2}


def gloo_variables_seen(tmp_path, exported, gloo_rendezvous=GLOO_2X2, environment=None):
    write_file(tmp_path, environment or {}, gloo_rendezvous)
    script = tmp_path / "env.py"
    script.write_text(f"import json, os\nprint(json.dumps({{n: os.environ.get(n) for n in {GLOO_NAMES!r}}}))\n")
    process, stdout, stderr = run_rank(tmp_path, tmp_path, "--", sys.executable, str(script), env=exported)
    return process.returncode, stdout, stderr


def test_a_gloo_rank_gets_its_own_horovod_numbers_from_open_mpis(tmp_path):
    # Rank 3 of 2 hosts x 2 ranks: the second host's second rank. The plan's rendezvous comes from the host's file;
    # the numbers replace whatever the environment had.
    code, stdout, stderr = gloo_variables_seen(tmp_path, open_mpi_rank(3, 4, 1, 2), environment={"HOROVOD_RANK": "0"})
    assert code == 0 and json.loads(stdout) == {
        "HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2",
        "HOROVOD_CROSS_RANK": "1", "HOROVOD_CROSS_SIZE": "2", "HOROVOD_HOSTNAME": "host-1"}, stderr


def test_without_the_plans_rendezvous_a_rank_gets_no_horovod_numbers(tmp_path):
    # Whatever the environment says: whether the job runs over Gloo is the plan's to say.
    code, stdout, stderr = gloo_variables_seen(tmp_path, open_mpi_rank(3, 4, 1, 2), gloo_rendezvous=None,
                                               environment={"HOROVOD_CONTROLLER": "gloo",
                                                            "HOROVOD_CPU_OPERATIONS": "gloo"})
    assert code == 0 and json.loads(stdout) == dict.fromkeys(GLOO_NAMES), stderr


def test_a_gloo_rank_placed_otherwise_than_by_slot_stops_with_the_reason(tmp_path):
    code, stdout, stderr = gloo_variables_seen(tmp_path, open_mpi_rank(1, 4, 0, 2))
    assert code == 1 and stdout == ""
    assert "rank_env: Gloo under mpirun needs ranks placed by slot, 2 per host: rank 1 of 4" in stderr


def test_starting_a_rank_imports_none_of_the_launchers_planning():
    # Every rank imports backends/mpi/ to start: its package must not bring the backend's planning (0.07-0.18 s measured).
    imported = subprocess.run([sys.executable, "-c", f"import json, sys, {MPI_RANK_ENV}; print(json.dumps(list(sys.modules)))"],
                              env={"PYTHONPATH": str(unit_paths.SRC)}, capture_output=True, text=True, check=True)
    modules = set(json.loads(imported.stdout))
    assert {MPI_RANK_ENV, "sagemaker_mxnet_horovod.act.rank_program"} <= modules
    assert not {name for name in modules if name.startswith(("sagemaker_mxnet_horovod.plan",
                                                               "sagemaker_mxnet_horovod.parse",
                                                               "sagemaker_mxnet_horovod.backends.mpi.backend"))}

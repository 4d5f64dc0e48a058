"""cli.py, `train`: a whole job on this host as one real process, no MPI (a single host runs the program
without it): the user's script fetched from the code directory and run there, the outcome files written
(success; failure with the script's own text first), exit codes (the script's; 2 for a bad configuration,
with nothing run; 143 when stopped), an earlier run's outcome cleared, stray output copied into output/data, the
start log's /dev/shm warning from what is really free of it (a tmpfs of its own, partly filled, as root).
Multi-host jobs (the master, workers, mpirun) run across real containers: tests/integration, tests/faults."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from unit_helpers import unit_paths
from unit_helpers.live_output import wait_for_line

SRC = unit_paths.SRC


def job(tmp_path, script: str, hps=None) -> Path:
    """SageMaker's files for a one-host job of the user script `script` (train.py); returns its /opt/ml."""
    base = tmp_path / "ml"
    (base / "input" / "config").mkdir(parents=True)
    (base / "code").mkdir()
    (base / "code" / "train.py").write_text(textwrap.dedent(script))
    hps = {"sagemaker_program": "train.py", "sagemaker_submit_directory": str(base / "code"), **(hps or {})}
    # JSON-encoded values, as SDK v2 writes them.
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps({k: json.dumps(v)
                                                                                 for k, v in hps.items()}))
    return base


def start_train(base: Path, *args: str, env=None, within=()) -> subprocess.Popen:
    """`train` ARGS, run within a command's argv prefix when given (own_dev_shm)."""
    return subprocess.Popen([*within, sys.executable, "-m", "sagemaker_mxnet_horovod.cli", *args],
                            env={**os.environ, "PYTHONPATH": str(SRC), "SAGEMAKER_BASE_DIR": str(base),
                                 "SMMH_RUN_DIR": str(base.parent / "run"), "SM_NUM_GPUS": "0", **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def train(base: Path, *args: str, env=None, within=()) -> tuple[int, str, str]:
    process = start_train(base, *args, env=env, within=within)
    stdout, stderr = process.communicate(timeout=120)
    return process.returncode, stdout, stderr


@pytest.fixture
def own_dev_shm():
    """The argv prefix that runs a command in a mount namespace of its own (unshare) with a 64 MiB tmpfs over its
    /dev/shm, 40 MiB of it taken by another process's file, as in a host's /dev/shm shared with other containers
    (docker run --ipc=host). Needs root (CAP_SYS_ADMIN), as on the host; the host's /dev/shm is left alone."""
    script = ("mount -t tmpfs -o size=64m tmpfs /dev/shm && head -c 41943040 /dev/zero > /dev/shm/another-process"
              ' && exec "$@"')
    prefix = ("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "own-dev-shm")
    tried = subprocess.run([*prefix, "true"], capture_output=True, text=True, check=False)
    if tried.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs over /dev/shm in a mount namespace here ({tried.stderr.strip()}); "
                    "root on the host can")
    return prefix


def failure(base: Path) -> list[str]:
    return (base / "output" / "failure").read_text().splitlines()


def test_the_script_runs_in_the_code_directory_with_its_arguments_and_the_job_succeeds(tmp_path):
    base = job(tmp_path, """\
        import json, os, sys
        print("epoch 1: accuracy 0.5")
        with open(os.path.join(os.environ["SM_MODEL_DIR"], "seen.json"), "w") as f:
            json.dump([os.getcwd(), sys.argv[1:], os.environ["SM_CURRENT_HOST"]], f)
    """, {"epochs": 2, "lr": 0.1})
    # An earlier run in this directory failed: its outcome must not be taken for this one's.
    (base / "output").mkdir()
    (base / "output" / "failure").write_text("old reason\n")
    code, stdout, stderr = train(base)
    assert code == 0, stderr
    assert json.loads((base / "model" / "seen.json").read_text()) == [
        str(base / "code"), ["--epochs", "2", "--lr", "0.1"], "algo-1"]
    assert "epoch 1: accuracy 0.5\n" in stdout
    assert sorted(p.name for p in (base / "output").iterdir()) == ["data", "success"]
    assert f"train: removed {base / 'output' / 'failure'} (old reason), left by an earlier run" in stderr


def test_a_failing_script_is_named_with_its_error_and_its_exit_code_is_the_jobs(tmp_path):
    base = job(tmp_path, """\
        raise ValueError("labels out of range")
    """)
    code, _, stderr = train(base)
    assert code == 1
    assert failure(base)[0] == "train.py on algo-1 exited with code 1: ValueError: labels out of range"
    assert not (base / "output" / "success").exists()


def test_the_scripts_own_failure_text_comes_first(tmp_path):
    base = job(tmp_path, """\
        import os, sys
        with open(os.path.join(os.environ["SM_OUTPUT_DIR"], "failure"), "w") as f:
            f.write("Data channel 'train' is empty")
        sys.exit(3)
    """)
    code, _, _ = train(base)
    assert code == 3
    assert failure(base)[:2] == ["Data channel 'train' is empty", "train: train.py on algo-1 exited with code 3"]


def test_a_bad_configuration_exits_2_and_runs_nothing(tmp_path):
    base = job(tmp_path, """\
        open("ran", "w").close()
    """, {"sagemaker_mpi_num_of_processes_per_host": "two"})
    code, _, _ = train(base)
    assert code == 2
    assert failure(base) == ["invalid job configuration: hyperparameter sagemaker_mpi_num_of_processes_per_host='two' "
                             "is not an integer"]
    assert not (base / "code" / "ran").exists() and not (base / "model").exists()


def test_a_script_missing_from_the_code_directory_is_a_configuration_error(tmp_path):
    base = job(tmp_path, "", {"sagemaker_program": "trian.py"})
    code, _, _ = train(base)
    assert code == 2
    assert failure(base)[0].startswith(f"invalid job configuration: sagemaker_program 'trian.py' is not in "
                                       f"sagemaker_submit_directory {base / 'code'} (contents: ['train.py'])")


def test_dry_run_prints_the_plan_and_changes_nothing(tmp_path):
    base = job(tmp_path, """\
        open("ran", "w").close()
    """)
    (base / "output").mkdir()
    (base / "output" / "failure").write_text("old reason\n")
    (base / "input" / "config" / "debughookconfig.json").write_text('{"S3OutputPath": "s3://b/debug"}')
    code, stdout, stderr = train(base, "--dry-run")
    assert code == 0, stderr
    assert "role: single" in stdout and f"program: train.py from {base / 'code'}" in stdout
    assert "note: SageMaker Debugger hook configuration (debughookconfig.json): collections losses" in stdout
    assert "sagemaker_mxnet_horovod.act.rank_program" in stdout
    assert sorted(p.name for p in base.iterdir()) == ["code", "input", "output"]  # nothing written
    assert failure(base) == ["old reason"] and sorted(p.name for p in (base / "code").iterdir()) == ["train.py"]


def test_the_start_log_warns_when_what_is_free_of_dev_shm_is_less_than_the_job_needs(tmp_path, own_dev_shm):
    # gather() reads this host's /dev/shm, and the plan's warning compares the job's need with what is free of it,
    # not its size: one data-loader worker (num_workers, a user's script's usual hyperparameter) needs 64 MiB, which
    # the 64 MiB tmpfs has in size but not free (24 MiB: 64 - 40 of another process's).
    base = job(tmp_path, """\
        print("trained")
    """, {"num_workers": 1})
    code, stdout, stderr = train(base, within=own_dev_shm)
    assert code == 0, stderr
    assert "WARNING: /dev/shm is 24 MiB free of 64 MiB, less than the about 64 MiB (1 rank x 1 data-loader workers " \
           "(num_workers) x 64 MiB) this job needs" in stderr, stderr
    assert "trained\n" in stdout


def test_a_stop_ends_the_job_and_the_failure_file_says_so(tmp_path):
    base = job(tmp_path, """\
        import time
        print("ready", flush=True)
        time.sleep(60)
    """)
    process = start_train(base)
    try:
        assert wait_for_line(process.stdout, "ready", 60), "the script did not start within 60 s"
        process.send_signal(signal.SIGTERM)  # SageMaker's StopTrainingJob
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143, stderr
    assert failure(base) == ["stopped by SIGTERM (SageMaker stop or spot interruption); the job was killed by "
                             "SIGTERM"]


def test_output_written_outside_output_data_is_copied_there_at_the_end(tmp_path):
    log = tmp_path / "ml" / "output" / "autotune.csv"  # where Horovod's autotuning writes, as the job says
    base = job(tmp_path, f"""\
        open({str(log)!r}, "w").write("fusion,cycle")
    """)
    code, _, stderr = train(base, env={"HOROVOD_AUTOTUNE_LOG": str(log)})
    assert code == 0, stderr
    assert (base / "output" / "data" / "autotune.csv").read_text() == "fusion,cycle"
    assert f"HOROVOD_AUTOTUNE_LOG={log} is outside {base / 'output' / 'data'}" in stderr


def test_train_stacks_prints_every_ranks_stack_of_the_running_job_which_goes_on(tmp_path):
    # `docker exec CONTAINER train stacks`: a second train process in the container asks the running one.
    base = job(tmp_path, """\
        import sys
        def wait_for_release(fifo):
            print("waiting", flush=True)
            open(fifo).close()
        wait_for_release(sys.argv[sys.argv.index("--release") + 1])
    """, {"release": str(tmp_path / "release")})
    os.mkfifo(tmp_path / "release")
    running = start_train(base)
    try:
        assert wait_for_line(running.stdout, "waiting", 60), "the job did not start within 60 s"
        code, stdout, stderr = train(base, "stacks")
        assert code == 0, stderr
        assert "===== algo-1-rank-0.txt\nrank 0 on algo-1" in stdout and "in wait_for_release" in stdout
        (tmp_path / "release").write_text("")
        _, job_stderr = running.communicate(timeout=60)
    finally:
        running.kill()
    assert running.returncode == 0 and (base / "output" / "success").exists()  # not stopped
    assert "train: stacks of rank 0 on algo-1 (SIGUSR1):" in job_stderr  # the job's log has them
    code, _, stderr = train(base, "stacks")
    assert code == 1 and "no train launcher is running in this container" in stderr


def test_every_error_that_ends_train_maps_to_its_failure_and_exit_code(capsys):
    from sagemaker_mxnet_horovod.cli import Step, failure_of
    from sagemaker_mxnet_horovod.core.exits import ClusterError, ConfigError, PlanError, StopRequested

    step = Step("setup failed", "algo-1")
    assert failure_of(ConfigError("hosts is empty"), step).exit_code == 2
    assert failure_of(PlanError("more processes than GPUs"), step).render() == (
        "invalid job configuration: more processes than GPUs")
    stopped = failure_of(StopRequested(signal.SIGINT), step)  # Ctrl-C before the job ran: a stop, as SIGTERM
    assert (stopped.exit_code, stopped.cause) == (
        143, "stopped by SIGINT (SageMaker stop or spot interruption); the job had not started")
    assert capsys.readouterr().err == ""  # expected ends: no traceback
    try:
        raise ClusterError("worker algo-2 did not check in")
    except ClusterError as error:
        unexpected = failure_of(error, step)
    assert (unexpected.exit_code, unexpected.cause, unexpected.host) == (
        1, "setup failed on algo-1: ClusterError: worker algo-2 did not check in", "algo-1")
    assert "Traceback" in capsys.readouterr().err

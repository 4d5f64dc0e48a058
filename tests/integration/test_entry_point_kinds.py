"""A user's entry point runs as the sagemaker-training toolkit runs it (its _entry_point_type rule): a `.sh` file
through its own #! line, and a code directory with a setup.py as an installed package, `python -m NAME`. Two
hosts, one rank each, through mpirun."""

import json
from pathlib import Path

from local_job import JobSpec, run_job

CODE = Path(__file__).resolve().parent / "code_kinds"


def run(image, workdir, code, program, env=None):
    hps = {"sagemaker_program": program, "sagemaker_submit_directory": "/opt/ml/code", "mpi_peer_timeout_s": "60",
           "sagemaker_mpi_enabled": "true", "epochs": 2}
    return run_job(JobSpec(image=image, hosts=2, hyperparameters=hps, env=env or {}, code_dir=CODE / code,
                           timeout_s=180), workdir)


def test_a_shell_entry_point_runs_through_its_own_interpreter_line(image, tmp_path):
    result = run(image, tmp_path, "command", "train.sh")
    assert result.exit_codes == [0, 0], result.describe()
    for rank, host in enumerate(result.hosts):
        lines = (host.root / "model" / f"rank-{rank}.txt").read_text().splitlines()
        assert lines == ["bash 5", "cwd /opt/ml/code", "args --epochs 2"], lines


def test_a_code_directory_with_setup_py_is_installed_and_run_as_a_module(image, tmp_path):
    # The test containers reach no package index: pip builds the package with the image's setuptools, offline.
    result = run(image, tmp_path, "package", "train.py", env={"PIP_NO_BUILD_ISOLATION": "0", "PIP_NO_INDEX": "1"})
    assert result.exit_codes == [0, 0], result.describe()
    for rank, host in enumerate(result.hosts):
        assert "installing the Python package in /opt/ml/code" in host.logs, host.logs
        record = json.loads((host.root / "model" / f"rank-{rank}.json").read_text())
        assert record == {"module": "train", "version": "1.2.3", "helper": "imported from the installed package",
                          "args": ["--epochs", "2"]}

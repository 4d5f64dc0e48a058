"""What a job leaves behind, as under the toolkit: `success` on every host after a successful job, none after
a failure; a failure file the user's program wrote kept (its text first, then the launcher's diagnosis); and a
script written for AWS's MXNet images (`sagemaker_mxnet_container.training_utils.save`) run through `train`."""

import json
import re

import pytest
from cluster_jobs import run

PROGRAM = {"sagemaker_program": "mxnet_module_job.py"}
USER_TEXT = "user check failed on {host}: label file has 3 classes, expected 10"


def test_mxnet_toolkit_script_saves_on_the_scheduler_host_and_success_is_written_on_every_host(image, tmp_path):
    # Outcome files of an earlier run in the same directories (local mode reuse) must not survive.
    for host in ("algo-1", "algo-2"):
        (tmp_path / host / "output").mkdir(parents=True)
        (tmp_path / host / "output" / "failure").write_text("stale reason from an earlier run\n")
    result = run(image, tmp_path, hps={**PROGRAM, "epochs": 2})
    assert result.exit_codes == [0, 0], result.describe()
    master, worker = result.hosts
    assert sorted(p.name for p in (master.root / "model").iterdir()) == [
        "model-0000.params", "model-shapes.json", "model-symbol.json"]
    assert json.loads((master.root / "model" / "model-shapes.json").read_text()) == [
        {"name": "data", "shape": [32, 4]}]
    assert "lro" in (master.root / "model" / "model-symbol.json").read_text()
    assert list((worker.root / "model").iterdir()) == []  # save() writes on the scheduler host only
    for host in result.hosts:
        assert (host.root / "output" / "success").read_text() == ""
        assert host.failure is None
        assert "left by an earlier run in this directory" in host.logs
    assert "scheduler host algo-1" in master.logs


@pytest.mark.parametrize("fail_host", ["algo-2", "algo-1"])
def test_failure_file_written_by_the_users_program_is_kept_on_every_host(image, tmp_path, fail_host):
    result = run(image, tmp_path, hps=PROGRAM, env={"FAIL_HOST": fail_host})
    assert 0 not in result.exit_codes, result.describe()
    master, worker = result.hosts
    user_text = USER_TEXT.format(host=fail_host)
    rank = {"algo-1": 0, "algo-2": 1}[fail_host]
    cause = rf"rank {rank} on {fail_host} (exited with code 1|failed): RuntimeError: rank {rank} on {fail_host}: bad labels"
    # Each host: this host's user text unlabelled, the other host's labelled, then the launcher's diagnosis.
    master_lines = master.failure.splitlines()
    worker_lines = worker.failure.splitlines()
    if fail_host == "algo-1":
        assert master_lines[0] == user_text and worker_lines[0] == f"[algo-1] {user_text}"
    else:
        assert master_lines[0] == f"[algo-2] {user_text}" and worker_lines[0] == user_text
    assert re.match(rf"train: {cause}", master_lines[1]), master.failure
    assert re.match(rf"train: worker algo-2: the job failed on algo-1: {cause}", worker_lines[1]), worker.failure
    for host in result.hosts:
        assert len(host.failure) <= 1024
        assert not (host.root / "output" / "success").exists()


def test_single_host_keeps_the_users_failure_text_and_writes_no_success(image, tmp_path):
    result = run(image, tmp_path, hosts=1, hps=PROGRAM, env={"FAIL_HOST": "algo-1"})
    assert result.exit_codes == [1], result.describe()
    lines = result.master.failure.splitlines()
    assert lines[0] == USER_TEXT.format(host="algo-1")
    assert lines[1] == ("train: mxnet_module_job.py on algo-1 exited with code 1: "
                        "RuntimeError: rank 0 on algo-1: bad labels")
    assert not (result.master.root / "output" / "success").exists()


def test_single_host_success(image, tmp_path):
    result = run(image, tmp_path, hosts=1, hps=PROGRAM)
    assert result.exit_codes == [0], result.describe()
    assert (result.master.root / "output" / "success").read_text() == ""
    assert (result.master.root / "model" / "model-shapes.json").exists()

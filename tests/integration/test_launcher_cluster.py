"""The launcher across real containers of the CPU image: SageMaker-like config files, algo-N names on a
private network, random container hostnames (as in SDK local mode), `docker run IMAGE train` on each."""

import json

from conftest import run


def rank_records(result):
    records = {}
    for host in result.hosts:
        for path in (host.root / "model").glob("rank-*.json"):
            record = json.loads(path.read_text())
            records[record["rank"]] = (host.name, record)
    return records


def test_two_hosts_one_process_each(image, tmp_path):
    result = run(image, tmp_path, hps={"epochs": "1", "flag": "False"}, env={"JOB_ENV_PROBE": "from-environment"})
    assert result.exit_codes == [0, 0], result.describe()
    records = rank_records(result)
    assert sorted(records) == [0, 1]
    for rank, (written_on, record) in records.items():
        assert record["size"] == 2 and record["sum"] == [3.0] * 4
        # Each rank ran on its own host and saw that host's SM_CURRENT_HOST (the toolkit gets this wrong).
        assert written_on == record["host"] == f"algo-{rank + 1}"
        assert record["args"] == ["--epochs", "1", "--flag", "False"]
        # The job's `environment` (set on every container) reaches ranks on workers too.
        assert record["probe"] == "from-environment"
    assert all(h.failure is None for h in result.hosts)
    assert "1 worker(s) ready" in result.master.logs


def test_two_hosts_two_processes_each(image, tmp_path):
    result = run(image, tmp_path, hps={"sagemaker_mpi_num_of_processes_per_host": "2"})
    assert result.exit_codes == [0, 0], result.describe()
    records = rank_records(result)
    assert sorted(records) == [0, 1, 2, 3]
    assert {rank: host for rank, (host, _) in records.items()} == {
        0: "algo-1", 1: "algo-1", 2: "algo-2", 3: "algo-2"}
    assert all(record["sum"] == [10.0] * 4 for _, record in records.values())


def test_interface_named_ethwe_falls_back(image, tmp_path):
    result = run(image, tmp_path, interface_name="ethwe")
    assert result.exit_codes == [0, 0], result.describe()
    assert "network_interface_name 'ethwe' does not exist here; using 'eth0'" in result.master.logs


def test_rank_raises_fails_every_host_with_the_cause(image, tmp_path):
    result = run(image, tmp_path, env={"FAIL_RANK": "1", "EXTRA_STEPS": "600"})
    assert result.exit_codes[0] != 0 and result.exit_codes[1] != 0, result.describe()
    master_failure = result.master.failure.splitlines()[0]
    assert master_failure == "rank 1 on algo-2 exited with code 1: ValueError: rank 1 was asked to fail"
    worker_failure = result.hosts[1].failure.splitlines()[0]
    assert worker_failure.startswith("worker algo-2: the job failed on algo-1: rank 1 on algo-2 exited with code 1")
    assert result.seconds < 60


def test_worker_never_starts(image, tmp_path):
    result = run(image, tmp_path, hps={"mpi_peer_timeout_s": "8"}, skip_hosts=("algo-2",))
    assert result.master.exit_code == 1, result.describe()
    assert result.master.failure.startswith(
        "cluster setup failed on master algo-1: worker(s) algo-2 did not check in with the master within the "
        "peer timeout")
    assert result.seconds < 30


def test_invalid_hyperparameter_fails_fast(image, tmp_path):
    result = run(image, tmp_path, hps={"sagemaker_mpi_num_of_processes_per_host": "two"})
    assert result.exit_codes == [2, 2], result.describe()
    assert result.master.failure == (
        "invalid job configuration: hyperparameter sagemaker_mpi_num_of_processes_per_host='two' is not an integer")
    assert result.seconds < 15


def test_single_process_writes_failure(image, tmp_path):
    result = run(image, tmp_path, hosts=1, env={"FAIL_RANK": "0"})
    assert result.exit_codes == [1], result.describe()
    first_line = result.master.failure.splitlines()[0]
    assert first_line == "allreduce.py on algo-1 exited with code 1: ValueError: rank 0 was asked to fail"


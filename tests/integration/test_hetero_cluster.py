"""Heterogeneous clusters across three real containers in two instance groups: MPI spans only the hosts of
sagemaker_distribution_instance_groups (master: the first of them), and a host outside those groups runs the
program on its own, as the sagemaker-training toolkit's Process runner does."""

import json

from cluster_jobs import run


def records_by_host(result):
    """host -> the rank records the allreduce program wrote to that host's model directory."""
    return {host.name: sorted((json.loads(p.read_text()) for p in (host.root / "model").glob("rank-*.json")),
                              key=lambda record: record["rank"])
            for host in result.hosts}


def mpirun_line(logs):
    return next(line for line in logs.splitlines() if "command: mpirun " in line)


def test_mpi_spans_the_distribution_group_and_the_other_host_runs_alone(image, tmp_path):
    groups = {"train": ["algo-1", "algo-2"], "data": ["algo-3"]}
    result = run(image, tmp_path, hosts=3, instance_groups=groups,
                 hps={"sagemaker_distribution_instance_groups": ["train"]})
    assert result.exit_codes == [0, 0, 0], result.describe()
    assert all(host.failure is None for host in result.hosts), result.describe()
    records = records_by_host(result)
    # The MPI job: two ranks, one on each host of "train", and nowhere else.
    for rank, host in enumerate(("algo-1", "algo-2")):
        [record] = records[host]
        assert (record["rank"], record["size"], record["host"], record["group"]) == (rank, 2, host, "train")
        assert record["sum"] == [3.0] * 4
    algo1, algo2, algo3 = result.hosts
    command = mpirun_line(algo1.logs)
    assert ":1,algo-2:1 -np 2 " in command and "algo-3" not in command
    assert "1 worker(s) ready" in algo1.logs
    assert "job finished on algo-1; worker algo-2 done" in algo2.logs
    # algo-3 ran the program on its own: one process, a world of one, in its own group.
    [alone] = records["algo-3"]
    assert (alone["rank"], alone["size"], alone["host"], alone["group"]) == (0, 1, "algo-3", "data")
    assert alone["sum"] == [1.0] * 4
    assert ("role: single (outside the distribution: instance group 'data' is not in "
            "sagemaker_distribution_instance_groups ['train']; runs the program on its own, one process "
            "(MPI runs on algo-1, algo-2, master algo-1))") in algo3.logs
    assert "mpirun" not in algo3.logs.replace("MPI runs on", "")


def test_master_is_the_first_host_of_the_distribution_group_not_algo_1(image, tmp_path):
    groups = {"data": ["algo-1"], "train": ["algo-2", "algo-3"]}
    result = run(image, tmp_path, hosts=3, instance_groups=groups,
                 hps={"sagemaker_distribution_instance_groups": ["train"]})
    assert result.exit_codes == [0, 0, 0], result.describe()
    records = records_by_host(result)
    for rank, host in enumerate(("algo-2", "algo-3")):
        [record] = records[host]
        assert (record["rank"], record["size"], record["host"]) == (rank, 2, host)
    algo1, algo2, algo3 = result.hosts
    assert "role: master" in algo2.logs and "1 worker(s) ready" in algo2.logs
    command = mpirun_line(algo2.logs)
    assert ":1,algo-3:1 -np 2 " in command and "algo-1" not in command
    assert "role: worker" in algo3.logs and "job finished on algo-2; worker algo-3 done" in algo3.logs
    [alone] = records["algo-1"]
    assert (alone["size"], alone["host"], alone["group"]) == (1, "algo-1", "data")
    assert "role: single (outside the distribution: instance group 'data'" in algo1.logs


def test_unknown_distribution_group_fails_every_host_naming_key_and_value(image, tmp_path):
    groups = {"train": ["algo-1", "algo-2"], "data": ["algo-3"]}
    result = run(image, tmp_path, hosts=3, instance_groups=groups,
                 hps={"sagemaker_distribution_instance_groups": ["gpu"]})
    assert result.exit_codes == [2, 2, 2], result.describe()
    for host in result.hosts:
        assert host.failure == (
            "invalid job configuration: hyperparameter sagemaker_distribution_instance_groups=['gpu'] names "
            "instance group 'gpu', which resourceconfig.json does not have (instance_groups: train, data)")
        assert not list((host.root / "model").glob("rank-*.json"))

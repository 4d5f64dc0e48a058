"""Horovod's Gloo under the launcher's mpirun, asked for by the job's environment (HOROVOD_CPU_OPERATIONS=gloo, as a
horovodrun --gloo user sets it), across real containers: every rank runs Horovod over Gloo, not MPI, and its
allreduce sums what each rank gave (ranks 0..n-1 give rank + 1: n(n+1)/2, by hand). Without the launcher's help
Horovod 0.28.1 crashes here (docs/launcher.md#horovods-gloo)."""

import json

from cluster_jobs import run


def gloo_records(result):
    return {record["rank"]: record for host in result.hosts for path in (host.root / "model").glob("gloo-rank-*.json")
            for record in [json.loads(path.read_text())]}


def test_two_hosts_one_rank_each_over_gloo(image, tmp_path):
    result = run(image, tmp_path, hps={"sagemaker_program": "gloo_allreduce.py"},
                 env={"HOROVOD_CPU_OPERATIONS": "gloo"}, timeout_s=120)
    assert result.exit_codes == [0, 0], result.describe()
    records = gloo_records(result)
    assert sorted(records) == [0, 1]
    for rank, record in records.items():
        assert record["sum"] == [3.0] * 3  # 1 + 2
        assert (record["size"], record["local_rank"], record["cross_rank"]) == (2, 0, rank)
        assert record["host"] == f"algo-{rank + 1}" and record["iface"] == "eth0"
    assert "Horovod's Gloo rendezvous serving 2 rank(s)" in result.master.logs


def test_one_host_two_ranks_over_gloo(image, tmp_path):
    result = run(image, tmp_path, hosts=1, hps={"sagemaker_program": "gloo_allreduce.py",
                                                "sagemaker_mpi_num_of_processes_per_host": "2"},
                 env={"HOROVOD_CONTROLLER": "GLOO"}, timeout_s=120)
    assert result.exit_codes == [0], result.describe()
    records = gloo_records(result)
    assert sorted(records) == [0, 1]
    for rank, record in records.items():
        assert record["sum"] == [3.0] * 3
        assert (record["size"], record["local_rank"], record["local_size"], record["iface"]) == (2, rank, 2, "lo")


def test_a_rendezvous_port_already_taken_fails_every_host_with_the_reason(image, tmp_path):
    # 7420 is the master's own check-in port (mpi_handshake_port), listening while the job runs: taken.
    result = run(image, tmp_path, hps={"sagemaker_program": "gloo_allreduce.py"},
                 env={"HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_RENDEZVOUS_PORT": "7420"}, timeout_s=120)
    assert result.exit_codes == [1, 1] and not result.timed_out, result.describe()
    reason = "Horovod's Gloo rendezvous cannot listen on "
    assert result.master.failure.startswith(reason) and ":7420: Address already in use" in result.master.failure
    assert reason in result.hosts[1].failure
    assert not gloo_records(result)  # no rank ran

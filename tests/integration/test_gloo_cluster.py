"""Horovod's Gloo under the launcher's mpirun, asked for by the job's environment (HOROVOD_CPU_OPERATIONS=gloo, as a
horovodrun --gloo user sets it) or by -x, across real containers: every rank runs Horovod over Gloo, not MPI, and its
allreduce sums what each rank gave (ranks 0..n-1 give rank + 1: n(n+1)/2, by hand). Without the launcher's help
Horovod 0.28.1 crashes here (docs/launcher.md#horovods-gloo). 2 hosts x 2 ranks with a stranger writing to the
rendezvous store while the job starts (docs/security.md), and the user's variables on every rank (docs/launcher.md,
"Who wins")."""

import json
import re
import threading
from pathlib import Path

from cluster_jobs import run
from local_job.containers import docker

STRANGERS = Path(__file__).resolve().parent / "strangers"


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


# The user's variables under Gloo, by -x and by the environment, for variables the launcher plans too.
USER_OPTIONS = "-x HOROVOD_CPU_OPERATIONS=gloo -x OMP_NUM_THREADS=3 -x MXNET_HOME=/opt/ml/my-mxnet"
USER_ENVIRONMENT = {"SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": "/opt/ml/warm", "OMP_NUM_THREADS": "2",
                    "HOROVOD_STALL_CHECK_TIME_SECONDS": "7"}
WHAT_EACH_RANK_GETS = {"OMP_NUM_THREADS": "3", "MXNET_HOME": "/opt/ml/my-mxnet", "HOROVOD_STALL_CHECK_TIME_SECONDS": "7",
                       "HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_CONTROLLER": "gloo",
                       "HOROVOD_GLOO_RENDEZVOUS_ADDR": "algo-1"}


def test_two_hosts_two_ranks_over_gloo_a_stranger_changes_nothing_and_the_users_variables_win(image, tmp_path):
    # A third container on the job's network writes every rank's address in every scope of the rendezvous store, and
    # deletes them, from the moment the store listens until it is gone: the master answers it nothing.
    stranger = {}

    def write_to_the_rendezvous(job) -> None:
        stranger["network"] = f"{job.project}-net"
        done = job.stranger(image, ["python", "/stranger/gloo_rendezvous.py", "algo-1", "7421"],
                            mounts=[(STRANGERS, "/stranger")], timeout=200)
        stranger["output"] = done.stdout + done.stderr
        stranger["done"].set()

    stranger["done"] = threading.Event()
    result = run(image, tmp_path, hps={"sagemaker_program": "gloo_allreduce.py",
                                       "sagemaker_mpi_num_of_processes_per_host": "2",
                                       "sagemaker_mpi_custom_mpi_options": USER_OPTIONS,
                                       "report-env": ",".join(WHAT_EACH_RANK_GETS)},
                 env=USER_ENVIRONMENT, timeout_s=200, during=write_to_the_rendezvous)
    finished = stranger["done"].wait(60)
    if "network" in stranger:  # run_job could not remove it while the stranger was on it
        docker("network", "rm", stranger["network"], check=False)
    assert result.exit_codes == [0, 0], result.describe() + f"\nstranger: {stranger.get('output')}"
    records = gloo_records(result)
    assert sorted(records) == [0, 1, 2, 3]
    for rank, record in records.items():
        assert record["sum"] == [10.0] * 3  # 1 + 2 + 3 + 4
        assert (record["size"], record["local_rank"], record["local_size"], record["cross_rank"]) == (4, rank % 2, 2,
                                                                                                      rank // 2)
        assert record["host"] == f"algo-{rank // 2 + 1}" and record["iface"] == "eth0"
        assert record["env"] == WHAT_EACH_RANK_GETS, rank
    assert re.search(r"OMP_NUM_THREADS=3 \(set by you; default would be \d+: ", result.master.logs)
    assert "MXNET_HOME=/opt/ml/my-mxnet (set by you; default would be /opt/ml/warm/mxnet: " in result.master.logs
    # The stranger wrote while the store listened, and was answered nothing; the master says so, once.
    assert finished, stranger
    address = re.search(r"stranger-address (\S+)", stranger["output"])
    assert address, stranger["output"]
    address = address.group(1)
    answers = dict(re.findall(r"(\w+)=(\d+)", stranger["output"].split("stranger ", 1)[-1]))
    assert int(answers.get("closed", 0)) > 0 and set(answers) <= {"closed", "refused"}, stranger["output"]
    ignored = f"ignored a connection to Horovod's Gloo rendezvous from {address}: not a host of this job"
    assert result.master.logs.count(ignored) == 1, result.master.logs


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

"""The launcher across real containers of the CPU image: SageMaker-like config files, algo-N names on a
private network, random container hostnames (as in SDK local mode), `docker run IMAGE train` on each."""

import json
import re

from cluster_jobs import release, run, wait_for


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
        # The 2 hosts share this machine (local_job's instance type "local"): the cores the rank may run on, halved.
        assert record["omp_num_threads"] == str(max(1, record["cpus"] // 2))
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
    # local_job's hosts share this machine as in SDK local mode (current_instance_type "local"): the cores a rank may
    # run on (its own count) are split between all 4 ranks, not 2, and the start log says so.
    for _, record in records.values():
        assert record["omp_num_threads"] == str(max(1, record["cpus"] // 4))
    assert re.search(r"OMP_NUM_THREADS=\d+ \(\d+ cores / \(2 ranks per host x 2 hosts on this machine\)\)",
                     result.master.logs)
    assert {record["instance_type"] for _, record in records.values()} == {"local"}


# Every route by which a user sets a variable (docs/launcher.md, "Who wins"), for variables the launcher plans too:
# OMP_NUM_THREADS, a HOROVOD_* (its stall check) and an MXNET_* (MXNET_HOME, under a warm pool's cache).
USER_ENVIRONMENT = {"SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": "/opt/ml/warm", "OMP_NUM_THREADS": "2",
                    "HOROVOD_STALL_CHECK_TIME_SECONDS": "7", "PIP_CACHE_DIR": "/opt/ml/my-pip"}
USER_OPTIONS = "-x OMP_NUM_THREADS=3 -x MXNET_HOME=/opt/ml/my-mxnet -x PIP_CACHE_DIR -x MY_VAR=hello --NCCL_DEBUG=VERSION"
WHAT_EACH_RANK_GETS = {
    "OMP_NUM_THREADS": "3",  # -x over the environment's 2 and the launcher's cores per rank
    "MXNET_HOME": "/opt/ml/my-mxnet",  # -x over the launcher's warm-pool default
    "PIP_CACHE_DIR": "/opt/ml/my-pip",  # the environment's, forwarded by -x NAME, over the warm-pool default
    "HOROVOD_STALL_CHECK_TIME_SECONDS": "7",  # the environment's, over the launcher's 60
    "HOROVOD_FUSION_THRESHOLD": str(8 * 1024 * 1024),  # the launcher's hyperparameter horovod_fusion_threshold_mb
    "NCCL_DEBUG": "VERSION",  # --NCCL_DEBUG
    "MY_VAR": "hello",  # -x, a variable of the user's own
}


def test_hosts_on_instances_of_their_own_keep_their_cores_and_every_route_of_the_users_wins(image, tmp_path):
    # A SageMaker instance type: each host is alone on its instance and its ranks split its cores between them. The
    # user sets variables by every route, and every rank of both hosts reports what it got.
    result = run(image, tmp_path, hps={"sagemaker_mpi_num_of_processes_per_host": "2", "horovod_fusion_threshold_mb": "8",
                                       "sagemaker_mpi_custom_mpi_options": USER_OPTIONS,
                                       "report-env": ",".join(WHAT_EACH_RANK_GETS)},
                 env=USER_ENVIRONMENT, instance_type="ml.c5.xlarge")
    assert result.exit_codes == [0, 0], result.describe()
    records = rank_records(result)
    assert sorted(records) == [0, 1, 2, 3]
    for rank, (_, record) in records.items():
        assert record["env"] == WHAT_EACH_RANK_GETS, rank
    # The start log names each default the user replaced; the cores a rank may run on, by its own count, halved.
    cpus = {record["cpus"] for _, record in records.values()}
    assert len(cpus) == 1, cpus
    cores_per_rank = max(1, cpus.pop() // 2)
    assert re.search(rf"OMP_NUM_THREADS=3 \(set by you; default would be {cores_per_rank}: \d+ cores / 2 ranks per "
                     r"host\)", result.master.logs)
    for host in result.hosts:
        for replaced in ("MXNET_HOME=/opt/ml/my-mxnet (set by you; default would be /opt/ml/warm/mxnet: ",
                         "PIP_CACHE_DIR=/opt/ml/my-pip (set by you; default would be /opt/ml/warm/pip: ",
                         "HOROVOD_STALL_CHECK_TIME_SECONDS=7 (set by you; default would be 60: "):
            assert replaced in host.logs, (host.name, replaced)
    assert {record["instance_type"] for _, record in records.values()} == {"ml.c5.xlarge"}


def test_eight_hosts(image, tmp_path):
    # The launcher at scale: 7 workers check in at once, mpirun starts 7 daemons over ssh from the master
    # alone (no tree spawn). benchmarks/launcher_scale.py runs 16; 8 keeps this test well under a minute.
    result = run(image, tmp_path, hosts=8)
    assert result.exit_codes == [0] * 8 and not result.timed_out, result.describe()
    records = rank_records(result)
    assert sorted(records) == list(range(8))
    assert all(record["size"] == 8 and record["sum"] == [36.0] * 4 for _, record in records.values())
    assert {rank: host for rank, (host, _) in records.items()} == {r: f"algo-{r + 1}" for r in range(8)}
    assert "7 worker(s) ready" in result.master.logs and "7 worker(s) released" in result.master.logs


def test_interface_named_ethwe_falls_back(image, tmp_path):
    result = run(image, tmp_path, interface_name="ethwe")
    assert result.exit_codes == [0, 0], result.describe()
    assert "network_interface_name 'ethwe' does not exist here; using 'eth0'" in result.master.logs


def test_rank_raises_fails_every_host_with_the_cause(image, tmp_path):
    result = run(image, tmp_path, env={"FAIL_RANK": "1", "EXTRA_STEPS": "600"})
    assert result.exit_codes[0] != 0 and result.exit_codes[1] != 0, result.describe()
    # Either rank 1's own exit reaches mpirun first, or rank 0's (it read Horovod's shutdown): rank 1 is named.
    cause = r"rank 1 on algo-2 (exited with code 1|failed): ValueError: rank 1 was asked to fail"
    master_failure = result.master.failure.splitlines()[0]
    assert re.match(cause, master_failure), master_failure
    worker_failure = result.hosts[1].failure.splitlines()[0]
    assert re.match("worker algo-2: the job failed on algo-1: " + cause, worker_failure), worker_failure
    assert result.seconds < 60  # fails fast: a generous bound (docs/faults.md: 3 s from the fault to the exits)


def test_worker_never_starts(image, tmp_path):
    result = run(image, tmp_path, hps={"mpi_peer_timeout_s": "8"}, skip_hosts=("algo-2",))
    assert result.master.exit_code == 1, result.describe()
    assert result.master.failure.startswith(
        "cluster setup failed on master algo-1: worker(s) algo-2 did not check in with the master within the "
        "peer timeout")
    assert result.seconds < 30  # fails fast: at the 8 s peer timeout; a generous bound


def test_invalid_hyperparameter_fails_fast(image, tmp_path):
    result = run(image, tmp_path, hps={"sagemaker_mpi_num_of_processes_per_host": "two"})
    assert result.exit_codes == [2, 2], result.describe()
    # Each host finds the error in its own config, before any cluster setup: the worker does not wait for a
    # master that is gone (it would fail with a cluster error after the 60 s peer timeout).
    for host in result.hosts:
        assert host.failure == ("invalid job configuration: hyperparameter sagemaker_mpi_num_of_processes_per_host="
                                "'two' is not an integer"), result.describe()


def test_single_process_writes_failure(image, tmp_path):
    result = run(image, tmp_path, hosts=1, env={"FAIL_RANK": "0"})
    assert result.exit_codes == [1], result.describe()
    first_line = result.master.failure.splitlines()[0]
    assert first_line == "allreduce.py on algo-1 exited with code 1: ValueError: rank 0 was asked to fail"



LISTENERS = r"""
import json, socket, struct
found = []
for line in open('/proc/net/tcp').read().splitlines()[1:]:
    local, state = line.split()[1], line.split()[3]
    if state == '0A':  # LISTEN
        address, port = local.split(':')
        found.append([socket.inet_ntoa(struct.pack('<I', int(address, 16))), int(port, 16)])
print(json.dumps({'listeners': found, 'eth0': socket.gethostbyname(socket.gethostname())}))
"""


def test_sshd_only_on_workers_and_only_on_the_cluster_interface(image, tmp_path):
    """While a 2-host job runs: the worker's sshd listens on its cluster address alone, never on
    0.0.0.0; the master runs no sshd (mpirun only connects out from it)."""
    seen = {}

    def inspect_hosts_then_release(job):
        # Both ranks wait in open() of a FIFO until released: the job is surely running while the hosts are read
        # (a job that outran the inspection failed CI once: "job: 8.0 s").
        fifos = [tmp_path / host / "release" for host in ("algo-1", "algo-2")]
        wait_for(lambda: all(fifo.exists() for fifo in fifos), "both ranks waiting")
        for host in ("algo-1", "algo-2"):
            seen[host] = json.loads(job.exec(host, "python3", "-c", LISTENERS).stdout)
            seen[host]["sshd"] = job.exec(host, "sh", "-c", "cat /proc/[0-9]*/comm | grep -cx sshd || true").stdout
        for fifo in fifos:
            release(fifo)

    result = run(image, tmp_path, hps={"release-fifo": "/opt/ml/release"}, during=inspect_hosts_then_release)
    assert result.exit_codes == [0, 0] and result.during_error is None, result.describe()
    worker_ssh = [address for address, port in seen["algo-2"]["listeners"] if port == 22]
    assert worker_ssh == [seen["algo-2"]["eth0"]], seen
    assert not [port for _, port in seen["algo-1"]["listeners"] if port == 22], seen
    assert seen["algo-1"]["sshd"].strip() == "0", seen

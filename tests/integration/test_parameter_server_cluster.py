"""MXNet's parameter servers across real containers (sagemaker_parameter_server_enabled=true): every host starts
its own scheduler, servers and workers, no mpirun and no ssh; a user's dist_sync script (code/kvstore_sum.py) and
the built-in MNIST with kvstore=dist_sync; what a first run shows, as for MPI jobs (every worker's stacks on
demand, each process's log, the console's chosen workers, every host's peak memory). Failures of each role:
tests/faults (scenarios.py)."""

import json
import os
import re
import subprocess

import pytest
from cluster_jobs import DOCKER, run, synthetic_mnist
from local_job import Channel, JobSpec, run_job
from rcnn_cluster_jobs import CHEAP
from test_diagnostics_cluster import complete_dumps, wait_for

PS = {"sagemaker_program": "kvstore_sum.py", "sagemaker_parameter_server_enabled": "true"}


def worker_records(result):
    """Each worker's record, by the launcher's number for it: (the host whose model dir has it, the record)."""
    return {int(path.stem.split("-")[1]): (host.name, json.loads(path.read_text()))
            for host in result.hosts for path in (host.root / "model").glob("worker-*.json")}


@pytest.mark.alone  # the whole job's seconds bounded where 5 or 9 processes import MXNet and train
def test_two_hosts_one_worker_each_as_awss_toolkit(image, tmp_path):
    result = run(image, tmp_path, hps={**PS, "epochs": "1"})
    assert result.exit_codes == [0, 0], result.describe()
    records = worker_records(result)
    assert sorted(records) == [0, 1]
    for worker, (written_on, record) in records.items():
        assert written_on == record["host"] == f"algo-{worker + 1}"
        assert record["size"] == 2 and record["sum"] == [3.0] * 4  # 1 + 2 through the servers
        dmlc = record["dmlc"]
        assert (dmlc["DMLC_ROLE"], dmlc["DMLC_PS_ROOT_URI"], dmlc["DMLC_PS_ROOT_PORT"]) == ("worker", "algo-1", "8000")
        assert (dmlc["DMLC_NUM_SERVER"], dmlc["DMLC_NUM_WORKER"], dmlc["DMLC_INTERFACE"]) == ("2", "2", "eth0")
        assert record["cwd"] == "/opt/ml/code" and record["scheduler_host"] == "algo-1"
        assert record["args"] == ["--epochs", "1"]
        # local_job's hosts share this machine as in SDK local mode (instance type "local"): the cores a worker's
        # process may run on, split between the 2 hosts' workers.
        assert record["omp_num_threads"] == str(max(1, record["cpus"] // 2))
    assert all(h.failure is None for h in result.hosts)
    assert all((h.root / "output" / "success").is_file() for h in result.hosts)
    master, other = result.master.logs, result.hosts[1].logs
    assert "train: started scheduler, server 0, worker 0" in master and "train: started server 1, worker 1" in other
    assert "1 host(s) checked in" in master and "mpirun" not in master and "sshd" not in other
    assert "straggler report: off in a parameter-server job" in master
    assert "[worker 0] worker 0 (kvstore rank" in master  # each process's output, tagged with its name
    assert result.seconds < 60


# The user's variables, by every route a parameter-server job has (docs/launcher.md, "Who wins"), for variables the
# launcher plans too: OMP_NUM_THREADS, a HOROVOD_* (its stall check) and an MXNET_* (MXNET_HOME, under a warm pool).
USER_ENVIRONMENT = {"SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": "/opt/ml/warm", "OMP_NUM_THREADS": "3",
                    "HOROVOD_STALL_CHECK_TIME_SECONDS": "7", "MXNET_HOME": "/opt/ml/my-mxnet"}
WHAT_EACH_WORKER_GETS = {"OMP_NUM_THREADS": "3", "HOROVOD_STALL_CHECK_TIME_SECONDS": "7", "MXNET_HOME": "/opt/ml/my-mxnet",
                         "HOROVOD_FUSION_THRESHOLD": str(8 * 1024 * 1024)}  # the last: a launcher hyperparameter's


@pytest.mark.alone  # the whole job's seconds bounded where 5 or 9 processes import MXNet and train
def test_three_hosts_two_workers_each_and_two_servers_and_the_users_variables_win(image, tmp_path):
    result = run(image, tmp_path, hosts=3, hps={**PS, "sagemaker_mpi_num_of_processes_per_host": "2",
                                                "sagemaker_parameter_server_num_servers": "2",
                                                "horovod_fusion_threshold_mb": "8",
                                                "report-env": ",".join(WHAT_EACH_WORKER_GETS)},
                 env=USER_ENVIRONMENT)
    assert result.exit_codes == [0, 0, 0], result.describe()
    records = worker_records(result)
    assert sorted(records) == list(range(6))
    assert {worker: host for worker, (host, _) in records.items()} == {
        0: "algo-1", 1: "algo-1", 2: "algo-2", 3: "algo-2", 4: "algo-3", 5: "algo-3"}
    assert sorted(record["rank"] for _, record in records.values()) == list(range(6))  # ps-lite's own numbers
    assert all(record["sum"] == [21.0] * 4 and record["dmlc"]["DMLC_NUM_SERVER"] == "2"
               for _, record in records.values())
    assert all(record["env"] == WHAT_EACH_WORKER_GETS for _, record in records.values())
    # 3 hosts x 2 workers on this machine (local_job's instance type "local"): the launcher's default, which the
    # user's 3 replaced, is the cores a worker may run on, over 6; the start log of every host says so.
    cpus = {record["cpus"] for _, record in records.values()}
    assert len(cpus) == 1, cpus
    default = max(1, cpus.pop() // 6)
    for host in result.hosts:
        assert f"OMP_NUM_THREADS=3 (set by you; default would be {default}: " in host.logs, host.name
        assert "MXNET_HOME=/opt/ml/my-mxnet (set by you; default would be /opt/ml/warm/mxnet: " in host.logs
    assert "train: started server 1, worker 2, worker 3" in result.hosts[1].logs
    assert "train: started worker 4, worker 5" in result.hosts[2].logs  # no server on the third host
    assert result.seconds < 90


def test_stacks_on_demand_process_logs_and_peak_memory(image, tmp_path):
    def ask_for_stacks_then_release(job) -> None:
        roots = {host: tmp_path / "job" / host for host in ("algo-1", "algo-2")}
        wait_for(lambda: all((root / "release").exists() for root in roots.values()), "both workers waiting")
        job.signal("algo-2", "USR1")  # docker kill --signal USR1 on the other host: the master asks every host
        wait_for(lambda: complete_dumps(roots["algo-1"]), "the master's dump")
        for root in roots.values():
            os.close(os.open(root / "release", os.O_WRONLY))  # the worker's open() returns: it goes on

    result = run(image, tmp_path / "job", hps={**PS, "release-fifo": "/opt/ml/release", "mpi_console_ranks": "0",
                                                "extra-steps": "3"}, during=ask_for_stacks_then_release)
    assert result.during_error is None and result.exit_codes == [0, 0], result.describe()  # the job went on
    master, other = result.hosts
    (dump,) = complete_dumps(master.root)  # every worker on every host, in the master's output
    assert sorted(p.name for p in dump.glob("*-rank-*.txt")) == ["algo-1-rank-0.txt", "algo-2-rank-1.txt"]
    assert all("in wait_for_release" in p.read_text() for p in dump.glob("*-rank-*.txt"))
    assert [d.name for d in complete_dumps(other.root)] == [dump.name]  # the other host writes its own too
    assert "train: stacks of rank 1 on algo-2 (SIGUSR1, asked on algo-2):" in master.logs
    logs = master.root / "output" / "data" / "logs"
    assert "worker 0 (kvstore rank" in (logs / "algo-1-rank-0.log").read_text()
    assert "worker 1 (kvstore rank" in (other.root / "output" / "data" / "logs" / "algo-2-rank-1.log").read_text()
    assert "[worker 0] worker 0 (kvstore rank" in master.logs  # mpi_console_ranks=0
    assert "[worker 1] worker 1 (kvstore rank" not in other.logs
    peak = next(line for line in master.logs.splitlines() if line.startswith("train: peak memory: "))
    assert "algo-1 " in peak and ", algo-2 " in peak and " of " in peak


@pytest.fixture(scope="module")
def mnist_data(image, tmp_path_factory):
    return synthetic_mnist(image, tmp_path_factory.mktemp("mnist"), 3000, 200)


def test_builtin_mnist_with_kvstore_dist_sync(image, tmp_path, mnist_data):
    # The built-in program's kvstore=dist_sync is enough: its launch rules run the parameter servers.
    spec = JobSpec(image=image, hosts=2, timeout_s=240,
                   hyperparameters={"sagemaker_program": "mnist", "kvstore": "dist_sync", "epochs": "2",
                                    "batch-size": "32", "log-interval": "0", "tensorboard": "false"},
                   channels=[Channel("train", mnist_data / "train"), Channel("test", mnist_data / "test")])
    result = run_job(spec, tmp_path)
    assert result.exit_codes == [0, 0], result.describe()
    assert "kvstore=dist_sync: MXNet's parameter servers" in result.master.logs
    metrics = json.loads((result.master.root / "model" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["history"][-1]["val_samples"] == 200
    # Two short epochs (94 steps per worker) on synthetic digits; chance is 0.1. That it is the same training as
    # Horovod's: tests/programs/test_mnist_kvstore.py.
    assert metrics["val_accuracy"] > 0.5, metrics


def test_builtin_faster_rcnn_with_kvstore_dist_sync(image, tmp_path):
    # The smallest settings that still run the whole model and its validation (rcnn_cluster_jobs.py: one iteration),
    # one val image per worker: the validation's results are gathered over the servers
    # (kvstore_workers.allgather_object).
    coco = tmp_path / "coco"
    subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp_path}:/data", image, "synth-data", "coco", "/data/coco",
                    "--train", "2", "--val", "2"], check=True, capture_output=True)
    hps = {"sagemaker_program": "faster_rcnn", "kvstore": "dist_sync", **CHEAP}
    result = run_job(JobSpec(image=image, hosts=2, hyperparameters=hps, channels=[Channel("train", coco)],
                             timeout_s=900), tmp_path / "job")
    assert result.exit_codes == [0, 0], result.describe()
    logs = result.master.logs
    assert "train: started scheduler, server 0, worker 0" in logs
    assert re.search(r"faster_rcnn: model=\S+ world_size=2 ", logs) and "val_bbox_map=" in logs, logs[-3000:]
    info = json.loads((result.master.root / "model" / "model.json").read_text())
    assert info["world_size"] == 2 and info["history"][-1]["val_images"] == 2, info

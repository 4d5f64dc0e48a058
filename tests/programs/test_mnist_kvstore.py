"""mnist.py as 2 parameter-server workers (--kvstore dist_sync) on one host, with a scheduler and a server started
as the launcher starts them (DMLC_* variables, `python -c 'import mxnet'`): the same training as 2 Horovod ranks
(gradients summed by the server, averaged over the workers), the collectives over the kvstore, the stop vote; and
the programs' Trainer over the servers: every worker's weights equal after the first step."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from entrypoint_job import Job

from programs.helpers import CONTAINER_SRC, ENTRYPOINTS, MNIST, base_env, channels_env, run_mnist

pytestmark = [pytest.mark.mpi, pytest.mark.usefixtures("needs_horovod")]

EPOCH_LINE = re.compile(r"^epoch=(\d+) train_loss=(\S+) train_accuracy=\S+ val_accuracy=(\S+) ", re.MULTILINE)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


FIRST_STEP = Path(__file__).with_name("kvstore_first_step.py")


def mnist_argv(workdir, args):
    return [sys.executable, str(MNIST), "--tensorboard-dir", str(Path(workdir) / "tensorboard"), *args]


class ParameterServerJob:
    """A scheduler, a server and the workers (`argv`, mnist.py in most tests) of one host, as processes."""

    def __init__(self, workdir, argv, env, workers=2):
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        dmlc = {"DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(free_port()), "DMLC_NUM_SERVER": "1",
                "DMLC_NUM_WORKER": str(workers), "DMLC_INTERFACE": "lo"}
        full = {**base_env(workdir, env), **dmlc}
        role = [sys.executable, "-c", "import mxnet"]
        self.roles = [subprocess.Popen(role, env={**full, "DMLC_ROLE": name}, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL) for name in ("scheduler", "server")]
        self.workers = [Job(subprocess.Popen(argv, env={**full, "DMLC_ROLE": "worker", "SMMH_WORKER_RANK": str(rank),
                                                        "SMMH_LOCAL_WORKER_RANK": str(rank),
                                                        "SMMH_LOCAL_WORKERS": str(workers)},
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=workdir),
                            workdir)
                        for rank in range(workers)]

    def wait(self, timeout):
        deadline = time.time() + timeout
        try:
            for worker in self.workers:
                worker.wait(max(1, deadline - time.time()))
        finally:
            self.end()
        return self.workers

    def end(self):
        """The launcher's part at the end: the roles serve until told, and nothing may outlive the job."""
        for process in [*self.roles, *(worker.proc for worker in self.workers)]:
            if process.poll() is None:
                process.kill()
                process.wait(10)


@pytest.mark.slow
def test_two_kvstore_workers_train_as_two_horovod_ranks(tiny_mnist, tmp_path):
    args = ["--epochs", "1", "--batch-size", "50", "--log-interval", "0", "--tensorboard", "false"]
    horovod = run_mnist(tmp_path / "horovod", args, env=channels_env(tiny_mnist), ranks=2, timeout=110)
    assert horovod.returncode == 0, horovod.explain()
    workers = ParameterServerJob(tmp_path / "kvstore", mnist_argv(tmp_path / "kvstore", [*args, "--kvstore", "dist_sync"]),
                                 channels_env(tiny_mnist)).wait(110)
    assert [w.returncode for w in workers] == [0, 0], "\n".join(w.explain() for w in workers)
    rank0 = workers[0].stdout
    assert "world_size=2" in rank0 and "lr=0.02 " in rank0 and not workers[1].stdout.strip()  # rank 0 logs
    (_, horovod_loss, horovod_acc), = EPOCH_LINE.findall(horovod.stdout)
    (_, kvstore_loss, kvstore_acc), = EPOCH_LINE.findall(rank0)
    # The same training: the server's sum, averaged, is Horovod's average (up to the order of the additions).
    assert float(kvstore_loss) == pytest.approx(float(horovod_loss), abs=2e-3), (horovod_loss, kvstore_loss)
    assert float(kvstore_acc) == pytest.approx(float(horovod_acc), abs=0.02), (horovod_acc, kvstore_acc)
    metrics = json.loads((tmp_path / "kvstore" / "model" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["history"][0]["val_samples"] == 200  # the whole test set


@pytest.mark.slow
def test_sigterm_to_one_worker_stops_both_with_a_checkpoint(tiny_mnist, tmp_path):
    args = ["--epochs", "3", "--batch-size", "10", "--log-interval", "5", "--kvstore", "dist_sync"]
    job = ParameterServerJob(tmp_path, mnist_argv(tmp_path, args), channels_env(tiny_mnist))
    try:
        job.workers[0].wait_for(r"epoch=1 batch=10/", timeout=90)
        os.kill(job.workers[1].proc.pid, signal.SIGTERM)
        signalled = time.time()
        workers = job.wait(60)
    finally:
        job.end()
    assert [w.returncode for w in workers] == [143, 143], "\n".join(w.explain() for w in workers)
    assert time.time() - signalled < 20
    assert len(list((tmp_path / "checkpoints").glob("checkpoint-epoch-0001-batch-*.json"))) == 1


# Jobs in the first-step race test (about 2 s each). Without the wait in kvstore_workers.py, a worker took the summed
# gradients for the last layer's weights in 52 of 179 jobs (0.29; at least 0.23 with 95% confidence), never another
# parameter; nothing tried forced it (the engine busy, that pull given the lowest priority, more workers' threads):
# 24 jobs let a regression through less than 1% of the time down to a rate of 0.18 (0.2% at 0.23).
FIRST_STEP_JOBS = 24


@pytest.mark.slow
def test_every_worker_has_the_same_weights_after_the_first_step(tmp_path):
    """The Trainer pulls the initial weights at its first step, when the gradients already exist: if that pull
    is not awaited before the gradients' push (kvstore_workers.py), it can lose the race and the worker takes the
    summed gradients for its weights. Enough jobs to see a race."""
    env = {"PYTHONPATH": os.pathsep.join([str(ENTRYPOINTS), str(CONTAINER_SRC)])}
    for job_number in range(FIRST_STEP_JOBS):
        workers = ParameterServerJob(tmp_path / str(job_number), [sys.executable, str(FIRST_STEP)], env).wait(60)
        assert [w.returncode for w in workers] == [0, 0], "\n".join(w.explain() for w in workers)
        digests = [w.stdout.strip() for w in workers]
        assert digests[0] == digests[1], f"job {job_number}: the workers' weights differ after one step"

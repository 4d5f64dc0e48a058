"""A tiny MXNet parameter-server script for launcher tests, as scripts for AWS's MXNet image are written
(mx.kv.create('dist_sync'), training_utils.scheduler_host): push/pull sums, one record per worker, optional
failures of a chosen worker (by the launcher's number for it, SMMH_WORKER_RANK; hang-at-exit: it never exits);
--release-fifo: each worker waits there (the stacks tests) before its extra steps; --log-steps, --wide-key: what each
extra step does (the progress watch's tests)."""

import json
import os
import sys
import time

import mxnet as mx
from sagemaker_mxnet_container.training_utils import scheduler_host


def option(name, default=None):
    """--name VALUE (a hyperparameter), else the default."""
    flag = "--" + name
    return sys.argv[sys.argv.index(flag) + 1] if flag in sys.argv[:-1] else default


def wait_for_release(fifo):
    """Block opening a FIFO until the test opens it for writing (the stacks tests look for this frame)."""
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    print(f"worker {os.environ.get('SMMH_WORKER_RANK')}: waiting for release", flush=True)
    open(fifo).close()


kv = mx.kv.create(option("kvstore", "dist_sync"))
rank, size = kv.rank, kv.num_workers
worker = int(os.environ.get("SMMH_WORKER_RANK", rank))
host = os.environ.get("SM_CURRENT_HOST")
kv.init(0, mx.nd.zeros((4,)))
kv.push(0, mx.nd.ones((4,)) * (rank + 1))
total = mx.nd.zeros((4,))
kv.pull(0, out=total)
record = {"rank": rank, "size": size, "worker": worker, "host": host, "sum": total.asnumpy().tolist(),
          "dmlc": {k: v for k, v in os.environ.items() if k.startswith("DMLC_")}, "cwd": os.getcwd(),
          "scheduler_host": scheduler_host(json.loads(os.environ["SM_HOSTS"])), "args": sys.argv[1:],
          "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "cpus": len(os.sched_getaffinity(0)),
          # --report-env A,B: those variables as this process got them (the tests of who wins: docs/launcher.md)
          "env": {name: os.environ.get(name) for name in (option("report-env") or "").split(",") if name}}
path = os.path.join(os.environ["SM_MODEL_DIR"], f"worker-{worker}.json")
with open(path, "w") as f:
    json.dump(record, f)
print(f"worker {worker} (kvstore rank {rank}/{size}) on {host}: sum={record['sum'][0]}", flush=True)

if option("fail-worker") is not None and int(option("fail-worker")) == worker:
    mode = option("fail-mode", "raise")
    with open(os.path.join(os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"), "fault-at"), "w") as f:
        f.write(repr(time.time()))  # the moment of the fault, for the fault suite
    if mode == "raise":
        raise ValueError(f"worker {worker} was asked to fail")
    if mode == "exit0":
        os._exit(0)  # ends without the kvstore's barrier at exit: the others wait for its gradients forever
    if mode == "shm":
        # Writes a batch into /dev/shm through a shared mapping, as a DataLoader worker does: past the filesystem's
        # size, touching a page kills the process by SIGBUS.
        import mmap

        size = 64 << 20
        fd = os.open(f"/dev/shm/batch-{worker}", os.O_RDWR | os.O_CREAT)
        os.ftruncate(fd, size)
        mmap.mmap(fd, size).write(b"x" * size)
    if mode == "hang-at-exit":
        # An exit handler that never returns: the script itself returns and the process never exits.
        import atexit
        import threading

        atexit.register(threading.Event().wait)
    if mode == "oom":
        # Grows until the container's memory limit: the kernel's OOM killer ends it (SIGKILL). Filled, not zeroed.
        hoard = []
        while True:
            hoard.append(b"x" * (32 << 20))
if option("release-fifo"):
    wait_for_release(option("release-fifo"))
early = option("fail-worker") is not None and int(option("fail-worker")) == worker and option("fail-mode") == "return"
# The others keep training, as real training would while a peer dies. "return": this worker has fewer steps (less
# data): it returns and waits in ps-lite's barrier at exit, while the others wait for its gradients.
# --wide-key: each step also sums a key larger than MXNET_KVSTORE_BIGARRAY_BOUND (10^6 values), which MXNet splits
# over every server, so that every server serves every step; --log-steps: a line per step, as training logs.
wide = mx.nd.zeros((1 << 20,)) if option("wide-key") == "true" else None
if wide is not None:
    kv.init(1, wide)
for step in range(0 if early else int(option("extra-steps", "0"))):
    kv.push(0, mx.nd.ones((4,)))
    kv.pull(0, out=total)
    if wide is not None:
        kv.push(1, mx.nd.ones(wide.shape))
        kv.pull(1, out=wide)
        wide.wait_to_read()
    total.wait_to_read()
    if option("log-steps") == "true":
        print(f"worker {worker}: step {step + 1}", flush=True)
    time.sleep(0.1)

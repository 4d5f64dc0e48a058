"""A tiny Horovod program for launcher tests: allreduce, one file per rank, optional failures."""

import time

STARTED = time.time()  # before the heavy imports: the benchmark counts them as the program's own time

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

import horovod.mxnet as hvd  # noqa: E402
import mxnet as mx  # noqa: E402


def option(name, default=None):
    """--name VALUE (a hyperparameter: every launcher passes those to every rank), else env NAME."""
    flag = "--" + name
    if flag in sys.argv[:-1]:
        return sys.argv[sys.argv.index(flag) + 1]
    return os.environ.get(name.upper().replace("-", "_"), default)


def read_pipe_channel(channel):
    """Every rank reads the channel's epoch-0 FIFO, as a script written for File mode would: the first
    reader drains it and the writer closes it; a later one blocks in open() for ever (no writer comes)."""
    fifo = os.environ["SM_CHANNEL_" + channel.upper()] + "_0"
    drained = "/tmp/pipe-drained"
    if hvd.local_rank() > 0:
        deadline = time.monotonic() + 120
        while not os.path.exists(drained) and time.monotonic() < deadline:
            time.sleep(0.05)  # the test's ordering: this rank comes second
        with open(os.path.join(os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"), "fault-at"), "w") as f:
            f.write(repr(time.time()))
        print(f"rank {hvd.rank()}: opening {fifo}", flush=True)
    with open(fifo, "rb") as f:
        size = len(f.read())
    open(drained, "w").close()
    return size


def wait_for_release(fifo):
    """Block opening a FIFO until the test opens it for writing (the stacks tests look for this frame)."""
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    print(f"rank {hvd.rank()}: waiting for release", flush=True)
    open(fifo).close()


def train_steps(count, prefix):
    """Allreduces as training's steps. Each reads its result, as training reads its loss: MXNet is asynchronous and
    only then raises a peer's failure."""
    for step in range(count):
        hvd.allreduce(mx.nd.ones((4,)), name=f"{prefix}{step}").asnumpy()
        time.sleep(0.1)


hvd.init()
rank, size = hvd.rank(), hvd.size()
total = hvd.allreduce(mx.nd.ones((4,)) * (rank + 1), average=False, name="sum").asnumpy().tolist()
record = {"started": STARTED, "rank": rank, "size": size, "local_rank": hvd.local_rank(), "sum": total,
          "host": os.environ.get("SM_CURRENT_HOST"), "args": sys.argv[1:],
          "probe": os.environ.get("JOB_ENV_PROBE"), "group": os.environ.get("SM_CURRENT_INSTANCE_GROUP"),
          "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "cpus": len(os.sched_getaffinity(0)),
          "instance_type": os.environ.get("SM_CURRENT_INSTANCE_TYPE"),
          # --report-env A,B: those variables as this process got them (the tests of who wins: docs/launcher.md)
          "env": {name: os.environ.get(name) for name in (option("report-env") or "").split(",") if name}}
path = os.path.join(os.environ["SM_MODEL_DIR"], f"rank-{rank}.json")
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.replace(path + ".tmp", path)
print(f"rank {rank}/{size} on {record['host']}: sum={total[0]}")

# Every rank trains a while before the fault, as a job would (the progress watch has wrapped Horovod's calls by then).
train_steps(int(option("steps-before-fault", "0")), "before")
fail_rank = option("fail-rank")
if fail_rank is not None and int(fail_rank) == rank:
    mode = option("fail-mode", "raise")
    # The moment of the fault, for the fault suite's "seconds from fault to exit".
    with open(os.path.join(os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"), "fault-at"), "w") as f:
        f.write(repr(time.time()))
    if mode == "raise":
        raise ValueError(f"rank {rank} was asked to fail")
    if mode == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "exit0":
        sys.exit(0)
    if mode == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "shm":
        # Writes a batch into /dev/shm through a shared mapping, as a DataLoader worker or NCCL's shared-memory
        # transport does: past the filesystem's size, touching a page raises SIGBUS ("Bus error").
        import mmap

        size = 64 << 20
        fd = os.open(f"/dev/shm/batch-{rank}", os.O_RDWR | os.O_CREAT)
        os.ftruncate(fd, size)
        mmap.mmap(fd, size).write(b"x" * size)
    if mode == "oom":
        # Grows until the container's memory limit: the kernel's OOM killer ends it (SIGKILL). Filled, not zeroed:
        # calloc'd pages would not count until touched.
        hoard = []
        while True:
            hoard.append(b"x" * (32 << 20))
    if mode == "solo":
        # Healthy work on one rank alone (validation, a checkpoint to a slow disk) while the others wait in
        # their next collective: it prints as it goes, then rejoins them.
        for part in range(int(option("solo-seconds", "15")) // 2):
            print(f"rank {rank}: validating, part {part}", flush=True)
            time.sleep(2)
    if mode == "hang":
        # Blocked on I/O outside any collective (a data reader that never gets data), process alive.
        print(f"rank {rank}: reading the next batch", flush=True)
        never_written, _ = os.pipe()
        os.read(never_written, 1)
release_fifo = option("release-fifo")
if release_fifo:
    wait_for_release(release_fifo)
pipe_channel = option("read-pipe-channel")
if pipe_channel:
    read_pipe_channel(pipe_channel)
# The others keep working in collectives, as real training would while a peer dies.
train_steps(int(option("extra-steps", "0")), "step")
record["finished"] = time.time()
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.replace(path + ".tmp", path)

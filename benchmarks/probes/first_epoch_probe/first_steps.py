"""The built-in MNIST program (mxnet_programs.mnist, as /opt/entrypoints/mnist.py runs it) with a clock on the phases
of its start and on every training step: benchmarks/first_epoch.py runs this file as the job's program
(sagemaker_submit_directory=/opt/ml/code), so each rank runs the very code of the image's built-in program, found
through the job's PYTHONPATH=/opt/entrypoints (benchmarks/common/probed_runs.py's PROBE_ENV; mpirun exports it).

Nothing of the program changes but for timestamps taken around the functions it calls (wrapped from outside), and,
with FIRST_STEPS_SYNC=N, a wait for the engine after the forward pass, after backward and after the optimizer step
of the first N steps of every epoch, which splits those steps into their parts (it serialises them: a dissecting
run's epoch times are not the program's). Each rank writes its record to
/opt/ml/output/data/first-steps-rank<R>.json when training ends.

Phases, each the wall time between two marks on this rank:
  python           the process's start (/proc) to this file's first line: the interpreter and its site imports
  program imports  the program's modules (standard library only)
  read data        DataPlan: the File-mode channels read, checked and split (before MPI)
  import mxnet     `import mxnet, numpy` in the Session
  horovod init     `import horovod.mxnet` and hvd.init() (MPI_Init, Horovod's background thread)
  build + first forward   the net built, initialised, hybridised and run once (inference graph, batch 1)
  resume check     the checkpoint look-up and its broadcast_object (Horovod's first collective)
  broadcast        broadcast_parameters (the parameters' first negotiation and broadcast)
  to epoch 1       what remains before the first epoch (TensorBoard, the first log line, the counts allreduce)
Steps: the time between consecutive calls of the trainer's step (one per training step), and epoch starts/ends.
"""

import ctypes
import json
import os
import sys
import time

FIRST_LINE = time.time()


def process_start():
    """This process's start, epoch seconds (10 ms resolution): /proc/self/stat's starttime after boot."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


RECORD = {"marks": [("process start", process_start()), ("python", FIRST_LINE)], "epochs": [], "sync": []}
SYNC_STEPS = int(os.environ.get("FIRST_STEPS_SYNC", "0"))
LIBC = ctypes.CDLL(None)


def mark(name):
    RECORD["marks"].append((name, time.time()))


def marker_line(text):
    """A line in this rank's stdout in order with oneDNN's verbose lines (C stdio): flush those first."""
    LIBC.fflush(None)
    os.write(1, f"first-steps: {text}\n".encode())


def wrap(owner, name, before=None, after=None):
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        if before:
            before(*args)
        result = original(*args, **kwargs)
        if after:
            after(result, *args)
        return result

    setattr(owner, name, wrapper)
    return original


from mxnet_programs import mnist, mnist_data, session  # noqa: E402 - timed: the program's own imports

mark("program imports")
wrap(mnist_data.DataPlan, "__init__", after=lambda *_: mark("read data"))
wrap(session, "import_horovod", before=lambda *_: mark("import mxnet"), after=lambda *_: mark("horovod init"))
wrap(session.Session, "resume", before=lambda *_: mark("build + first forward"),
     after=lambda *_: mark("resume check"))
wrap(session.Session, "broadcast_parameters", after=lambda *_: mark("broadcast"))


class StepClock:
    """Wraps a trainer's step: a timestamp per step; with SYNC_STEPS, the first steps split into their parts."""

    def __init__(self, trainer, mx):
        self.trainer, self.mx = trainer, mx
        self.times, self.step_in_epoch, self.last_end = [], 0, None
        original = trainer.step

        def step(*args, **kwargs):
            sync = self.step_in_epoch < SYNC_STEPS
            if sync:
                mx.nd.waitall()  # forward (its wait is in the loss wrapper) and backward done
                backward_done = time.time()
                marker_line(f"step {self.step_in_epoch + 1} optimizer")
            result = original(*args, **kwargs)
            if sync:
                mx.nd.waitall()
                done = time.time()
                RECORD["sync"][-1].update(backward=backward_done - RECORD["sync"][-1].pop("forward_done"),
                                          allreduce_update=done - backward_done)
                marker_line(f"step {self.step_in_epoch + 1} end")
            self.times.append(time.time())
            self.step_in_epoch += 1
            return result

        trainer.step = step


def timed_loss(loss_fn, clock, mx):
    def loss(out, label):
        if clock.step_in_epoch < SYNC_STEPS:
            start = clock.times[-1] if clock.times and clock.step_in_epoch else clock.epoch_start
            out.wait_to_read()
            now = time.time()
            RECORD["sync"].append({"epoch": len(RECORD["epochs"]), "step": clock.step_in_epoch + 1,
                                   "forward": now - start, "forward_done": now})
            marker_line(f"step {clock.step_in_epoch + 1} backward")
        return loss_fn(out, label)

    return loss


def after_init(_result, training, *args):
    mark("to epoch 1 start")
    training.clock = StepClock(training.trainer, training.mx)
    training.loss_fn = timed_loss(training.loss_fn, training.clock, training.mx)


wrap(mnist.MnistTraining, "__init__", after=after_init)
original_train_epoch = mnist.MnistTraining.train_epoch


def train_epoch(self, epoch, data, skip):
    clock = self.clock
    clock.step_in_epoch, clock.epoch_start = 0, time.time()
    if SYNC_STEPS:
        marker_line(f"epoch {epoch + 1} step 1 forward")
    first = len(clock.times)
    threads = len(os.listdir("/proc/self/task"))  # OpenMP teams started so far show here
    result = original_train_epoch(self, epoch, data, skip)
    RECORD["epochs"].append({"epoch": epoch + 1, "start": clock.epoch_start, "end": time.time(),
                             "program_seconds": result[3], "steps": clock.times[first:], "threads": threads})
    return result


mnist.MnistTraining.train_epoch = train_epoch
original_close = session.Session.close


def close(self):
    rank = self.rank
    out = os.path.join(os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"), f"first-steps-rank{rank}.json")
    with open(out, "w") as f:
        json.dump({"rank": rank, "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                   "cpus": len(os.sched_getaffinity(0)), **RECORD}, f)
    original_close(self)


session.Session.close = close

if __name__ == "__main__":
    mnist.main(sys.argv[1:])

"""The built-in Faster or Mask R-CNN program (mxnet_programs.rcnn, as /opt/entrypoints/faster_rcnn.py and
mask_rcnn.py run it) with a clock on the phases of its start and on every training iteration:
benchmarks/rcnn_first_iteration.py runs this file as the job's program (hyperparameter probe-model names the model), so
each rank runs the image's own R-CNN code, found through the job's PYTHONPATH=/opt/entrypoints
(benchmarks/common/probed_runs.py's PROBE_ENV); nothing changes but for timestamps taken around the functions it calls.
Each rank writes its record to /opt/ml/output/data/first-steps-rank<R>.json when training ends.

Phases (wall time between two marks on this rank): python (the interpreter's start to this file's first line),
program imports, read data (the channel read and checked), import mxnet + gluoncv (and the backbone check), horovod
init, GluonCV's get_model + initialisation, the first forward pass (256 px, every parameter's shape), the rest of
build net, datasets + transforms, resume
check, broadcast, to epoch 1 start. Iterations: for each, the wait for its batch from the DataLoader and the training
step itself (forward, losses, backward, optimizer step: the step ends with the losses read back, so it is waited for).
"""

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


RECORD = {"marks": [("process start", process_start()), ("python", FIRST_LINE)], "epochs": []}


def mark(name):
    RECORD["marks"].append((name, time.time()))


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


from mxnet_programs import session  # noqa: E402 - timed: the program's own imports
from mxnet_programs.rcnn import inputs, training  # noqa: E402
from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER  # noqa: E402
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK  # noqa: E402

mark("program imports")
wrap(inputs, "train_shard", after=lambda *_: mark("read data"))
wrap(session, "import_horovod", before=lambda *_: mark("import mxnet + gluoncv"),
     after=lambda *_: mark("horovod init"))
wrap(training.RcnnTraining, "materialize", before=lambda *_: mark("get_model + initialize"),
     after=lambda *_: mark("first forward (256 px)"))
wrap(training.RcnnTraining, "build_net", after=lambda *_: mark("build net"))
wrap(training.RcnnTraining, "build_data", after=lambda *_: mark("datasets + transforms"))
wrap(session.Session, "resume", after=lambda *_: mark("resume check"))
wrap(session.Session, "broadcast_parameters", after=lambda *_: mark("broadcast"))


class Iterations:
    """Timestamps of every batch's arrival and every training step's start and end in the current epoch."""

    def __init__(self):
        self.arrived, self.stepped = [], []

    def loader(self, loader):
        for batch in loader:
            self.arrived.append(time.time())
            yield batch

    def step(self, train_step):
        def timed(*args, **kwargs):
            start = time.time()
            result = train_step(*args, **kwargs)
            self.stepped.append((start, time.time()))
            return result

        return timed


def after_init(_result, run, *args):
    mark("to epoch 1 start")
    run.iterations = Iterations()
    run.train_step = run.iterations.step(run.train_step)


wrap(training.RcnnTraining, "__init__", after=after_init)
original_train_loader = training.RcnnTraining.train_loader
original_train_epoch = training.RcnnTraining.train_epoch


def train_loader(self, epoch, skip):
    return self.iterations.loader(original_train_loader(self, epoch, skip))


def train_epoch(self, epoch, skip):
    self.iterations.arrived, self.iterations.stepped = [], []
    start = time.time()
    result = original_train_epoch(self, epoch, skip)
    RECORD["epochs"].append({"epoch": epoch, "start": start, "end": time.time(),
                             "arrived": self.iterations.arrived, "stepped": self.iterations.stepped})
    return result


training.RcnnTraining.train_loader = train_loader
training.RcnnTraining.train_epoch = train_epoch
original_close = session.Session.close


def close(self):
    out = os.path.join(os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"), f"first-steps-rank{self.rank}.json")
    with open(out, "w") as f:
        json.dump({"rank": self.rank, "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                   "cpus": len(os.sched_getaffinity(0)), **RECORD}, f)
    original_close(self)


session.Session.close = close

if __name__ == "__main__":
    argv = sys.argv[1:]
    at = argv.index("--probe-model")
    model = {"faster_rcnn": FASTER, "mask_rcnn": MASK}[argv[at + 1]]
    training.main(model, argv[:at] + argv[at + 2:])

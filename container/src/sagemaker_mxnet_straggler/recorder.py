"""One rank's side of the straggler report: now and then (about every EVERY_S seconds, at least EVERY steps apart)
the ranks meet and time how long each waits for the others; rank 0 combines the figures (figures.py), logs the verdict
and writes the report (report.py).

MXNet is asynchronous: Python calling trainer.step is not the gradients being ready, and the allreduces are engine
operations that run as each gradient is. So on a timed step each rank waits for its gradients (its arrival), then
the ranks meet in a small allgather, which ends on every rank when the latest has arrived (its wait: from arrival to
then), and only then push their allreduces: that step loses its overlap of the backward pass with the allreduces,
hence one step in EVERY at most, and on short steps one about every EVERY_S seconds
(docs/benchmarks/straggler-overhead.md: the cost). A small collective, not the gradients'
allreduces, because every rank leaves it at about the same moment even when one host is slow at its share of the
allreduce work (a host short of CPU): a rank that leaves the allreduces late arrives late at the next meeting, and
is counted there. Each rank's time between two meetings, over the steps between, is its step time.

The meeting's allgather carries each rank's figures of the previous timed step to rank 0: no launcher channel is
needed. Every rank reads rank 0's step time and spacing in seconds from it and sets the next timed step from those
two numbers (figures.steps_between_timed): the same on every rank, so every rank meets at the same step. At
hvd.shutdown() and at exit, rank 0 writes what it has (never a collective: the others may be gone); the report on
disk is at most WRITE_EVERY_S old if rank 0 is killed.
"""

from __future__ import annotations

import atexit
import math
import os
import socket
import sys
import time

from sagemaker_mxnet_straggler.figures import EVERY, EVERY_S, Figures, Sample, judge, steps_between_timed
from sagemaker_mxnet_straggler.hook import EVERY_S_VARIABLE
from sagemaker_mxnet_straggler.report import write_report

START_STEPS = 20  # not timed: the first steps allocate memory, compile and warm caches; the 20th is the origin
WRITE_AFTER_SAMPLES = 5  # rank 0 writes the report once this many steps were timed
WRITE_EVERY_S = 60.0  # then rewrites it this often, and at hvd.shutdown() and exit
LOG_AFTER_SAMPLES = 20  # rank 0's first log line once this many steps were timed (the job so far)
LOG_EVERY_S = 300.0  # then a line at most this often (the steps since the last), and the launcher's at the end
NAME = "smmh.straggler"  # Horovod's names of the recorder's collectives


class Recorder:
    """This process's side, bound to the one trainer it times; rank 0's also holds the ranks' figures."""

    def __init__(self, hvd, mx, trainer, directory: str):
        self.hvd, self.mx, self.trainer, self.directory = hvd, mx, trainer, directory
        self.rank = hvd.rank()
        self.every_s = every_s_of(os.environ)
        self.steps = 0
        self.next_timed = START_STEPS  # the step at which the ranks next meet (the first time: the origin)
        self.every = EVERY  # steps from the last meeting to the next
        self.previous_done: float | None = None  # the last timed step's meeting
        # Its figures, sent at the next one: wait, step time, step, the steps the step time is over, every_s.
        self.last = [math.nan] * 5
        self.figures: Figures | None = None  # rank 0's
        self.started = self.next_write = self.next_log = 0.0  # rank 0's clock
        self.logged_step = 0

    def step(self, allreduce):
        """The trainer's allreduces (allreduce()); on a timed step, after the ranks met."""
        self.steps += 1
        if self.steps != self.next_timed:
            return allreduce()
        for gradient in (param.list_grad()[0] for param in self.trainer._params if param.grad_req != "null"):
            gradient.wait_to_read()
        arrived = time.monotonic()
        if self.previous_done is None:
            self.start()  # the origin: step times are counted from here
            self.previous_done = time.monotonic()
            self.next_timed += self.every
            return allreduce()
        gathered = self.meet()
        done = time.monotonic()
        self.last = [done - arrived, (done - self.previous_done) / self.every, float(self.steps), float(self.every),
                     self.every_s]
        self.previous_done = done
        # Rank 0's step time and spacing, as every rank got them: the same spacing everywhere, whatever a rank's own
        # environment says (nan at the first meeting: EVERY).
        self.every = steps_between_timed(float(gathered[0][1]), float(gathered[0][4]))
        self.next_timed += self.every
        result = allreduce()
        if self.figures is not None and not math.isnan(gathered[0][2]):
            self.receive(gathered)  # rank 0, while the allreduces run
        return result

    def start(self) -> None:
        """Every rank's host, once (a blocking allgather at the origin, which every rank reaches)."""
        host = os.environ.get("SM_CURRENT_HOST") or socket.gethostname()
        hosts = self.hvd.allgather_object(host, name=f"{NAME}.hosts")
        if self.rank == 0:
            self.figures = Figures(list(hosts))
            self.started = time.monotonic()
            atexit.register(self.finish)

    def meet(self):
        """The ranks meet in a 5-number allgather of the last timed step's figures: it ends on every rank when the
        latest has arrived. Every rank gets every rank's figures (rows by rank)."""
        return self.hvd.allgather(self.mx.nd.array([self.last], dtype="float64"), name=f"{NAME}.figures").asnumpy()

    def receive(self, gathered) -> None:
        """Rank 0: the last timed step's figures from every rank (rows by rank: wait, step time, step, steps)."""
        figures = self.figures
        now = time.monotonic()
        figures.add(Sample(int(gathered[0][2]), now - self.started, [float(row[0]) for row in gathered],
                           [float(row[1]) for row in gathered]), int(gathered[0][3]))
        logging = figures.received >= LOG_AFTER_SAMPLES and now >= self.next_log
        if logging:
            window = figures.since(self.logged_step)
            say(f"steps {window.first_step}-{window.last_step}: {judge(window).text()}")
            self.logged_step, self.next_log = figures.last_step, now + LOG_EVERY_S
        if logging or figures.received >= WRITE_AFTER_SAMPLES and now >= self.next_write:
            self.write()  # the figures of every line said are on disk

    def write(self) -> None:
        try:
            # Written after two meetings at least: the last was `every` steps before the next.
            write_report(self.directory, self.figures, self.every_s, START_STEPS, self.next_timed - self.every)
        except OSError as error:
            say(f"cannot write the report in {self.directory}: {error}")
        self.next_write = time.monotonic() + WRITE_EVERY_S

    def finish(self) -> None:
        """At hvd.shutdown() or exit, rank 0: the report with every sample received."""
        if self.figures is not None and self.figures.received:
            self.write()


def every_s_of(env) -> float:
    """EVERY_S_VARIABLE's seconds (the launcher checked it), else EVERY_S."""
    try:
        every_s = float(env.get(EVERY_S_VARIABLE, EVERY_S))
    except ValueError:
        every_s = -1.0
    if not every_s >= 0 or math.isinf(every_s):
        say(f"{EVERY_S_VARIABLE}={env.get(EVERY_S_VARIABLE)!r} is not a number of seconds: a step timed about "
            f"every {EVERY_S:g} s")
        return EVERY_S
    return every_s


def say(message: str) -> None:
    sys.stderr.write(f"straggler report: {message}\n")
    sys.stderr.flush()

"""The process side every program shares: exit codes, one-line errors, SIGTERM, and `run_main`.

Exit codes: 0 done; 2 bad hyperparameter or input (one line ``<prog>: error: ...`` on stderr, before any
MPI collective where possible); 1 unexpected failure (traceback, then the line); 143 stopped by SIGTERM.
"""

import os
import signal
import sys
import threading
import traceback

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_SIGTERM = 143  # 128 + SIGTERM, what a shell reports for a job stopped by SIGTERM


class ProgramError(Exception):
    """A user-facing problem (bad input, bad configuration): reported in one line, exit code 2."""

    def __init__(self, message, exit_code=EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


class Stopped(Exception):
    """SIGTERM was agreed on (the last checkpoint is complete): the process exits 143."""


def stderr_line(text):
    """One write(2) per line: print() writes the text and the newline separately, so ranks failing at the
    same moment interleave their messages on one line (seen under mpirun), breaking "first line" reports."""
    sys.stderr.flush()
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a non-file (pytest's capsys): one write then
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
        return
    os.write(fd, (text + "\n").encode("utf-8", "replace"))


def log(message):
    print(message, flush=True)


def warn(prog, message):
    stderr_line(f"{prog}: warning: {message}")


def exit_now(code):
    """Ends the process at once. os._exit, not sys.exit: interpreter shutdown runs Horovod's atexit hook and
    joins MXNet's engine and DataLoader worker pools, which can block on a rank that failed; mpirun's
    abort-on-non-zero-status takes the other ranks down."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def fail(prog, message, exit_code=EXIT_USAGE):
    """Prints ``prog: error: message`` and ends the process at once."""
    sys.stdout.flush()
    stderr_line(f"{prog}: error: {message}")
    exit_now(exit_code)


class StopRequest:
    """Set by SIGTERM (SageMaker stop, spot interruption); the training loop polls it.

    The handler only records the request: the loop finishes its batch, agrees with the other ranks to
    stop at the same step, checkpoints and exits 143.
    """

    def __init__(self):
        self._event = threading.Event()
        self.signum = None

    def set(self, signum=signal.SIGTERM):
        self.signum = signum
        self._event.set()

    @property
    def requested(self):
        return self._event.is_set()


def install_stop_handler():
    """A StopRequest that SIGTERM sets, in this process only.

    DataLoader workers are forked from the training process and would inherit a handler that only sets a
    flag: they would then ignore SIGTERM, and multiprocessing.Pool.terminate() (which the DataLoader uses on
    error or at the end of an epoch) would wait for them forever. Forked children get the default action
    back before they run any Python code of their own.
    """
    stop = StopRequest()
    main_pid = os.getpid()

    def handle(signum, frame):
        if os.getpid() != main_pid:  # a child forked before the at-fork hook existed: die as SIGTERM would
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        stop.set(signum)

    signal.signal(signal.SIGTERM, handle)
    os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    return stop


def last_line(exc):
    """MXNet errors carry a C++ traceback in their message: keep the line that says what failed."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else repr(exc)


def run_main(prog, train):
    """Runs `train(stop)` and ends the process with the exit code its outcome means; never returns.

    `train` does everything after argument parsing: local input checks first (so a bad input fails on
    every rank before any collective), then MXNet, Horovod and the training loop.
    """
    stop = install_stop_handler()
    try:
        train(stop)
    except Stopped as exc:
        if str(exc):  # stopped outside the training loop, e.g. waiting for input: say where
            log(f"{prog}: stopped by SIGTERM {exc}")
        exit_now(EXIT_SIGTERM)
    except ProgramError as exc:
        fail(prog, str(exc), exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - any failure must end this rank at once, never hang it
        traceback.print_exc()
        fail(prog, f"unexpected {type(exc).__name__}: {last_line(exc)}", EXIT_INTERNAL)
    except KeyboardInterrupt:
        fail(prog, "interrupted", EXIT_INTERRUPTED)
    exit_now(EXIT_OK)

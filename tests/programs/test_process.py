"""process: SIGTERM handling and the exit code and one line each outcome of a program ends with."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from mxnet_programs import process

from programs.helpers import ENTRYPOINTS


@pytest.fixture
def restored_sigterm():
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_sets_the_stop_request(restored_sigterm):
    stop = process.install_stop_handler()
    assert not stop.requested
    os.kill(os.getpid(), signal.SIGTERM)
    assert stop.requested and stop.signum == signal.SIGTERM


def test_a_forked_child_dies_of_sigterm_instead_of_inheriting_the_flag(restored_sigterm):
    process.install_stop_handler()
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a DataLoader worker would wait here for work
        os.write(ready_write, b"x")
        time.sleep(30)
        os._exit(0)
    os.read(ready_read, 1)  # a signal sent before the child finished forking would be lost
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child ignored SIGTERM")
    assert os.WIFSIGNALED(done[1]) and os.WTERMSIG(done[1]) == signal.SIGTERM


def run_body(body):
    """A program whose train(stop) is `body`, run through run_main in a fresh process."""
    code = textwrap.dedent("""
        import sys
        from mxnet_programs.process import ProgramError, Stopped, run_main

        def train(stop):
        {body}

        run_main("prog", train)
        print("not reached")
    """).format(body=textwrap.indent(textwrap.dedent(body), "    "))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ENTRYPOINTS), *sys.path]))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("body, code, last_line", [
    ("print('trained')", 0, None),
    ("raise ProgramError('bad channel')", 2, "prog: error: bad channel"),
    ("raise ValueError('boom')", 1, "prog: error: unexpected ValueError: boom"),
    ("raise RuntimeError('C++ trace\\nmore\\nwhat failed')", 1, "prog: error: unexpected RuntimeError: what failed"),
    ("raise Stopped()", 143, None),
    ("raise KeyboardInterrupt()", 130, "prog: error: interrupted"),
])
def test_each_outcome_has_its_exit_code_and_one_line(body, code, last_line):
    result = run_body(body)
    assert result.returncode == code, result.stderr
    assert "not reached" not in result.stdout
    if last_line is None:
        assert "error" not in result.stderr
    else:
        assert result.stderr.strip().splitlines()[-1] == last_line
    if code == 1:
        assert "Traceback" in result.stderr  # the traceback first, then the line


def test_a_stop_outside_the_training_loop_says_where():
    result = run_body("raise Stopped('while waiting for /opt/ml/input/data/train_0_1')")
    assert result.returncode == 143
    assert result.stdout.strip() == "prog: stopped by SIGTERM while waiting for /opt/ml/input/data/train_0_1"

"""process_group.py: a host's own processes as real processes: each exit reported as it happens with its last
stderr lines, output tagged with the process's name, a program that cannot start reported as an exit, stops by
role with SIGKILL after the grace, and nothing a process started left behind at the end."""

import os
import signal
import sys
import threading
import time

from sagemaker_mxnet_horovod.backends.parameter_server.process_group import (
    EXIT_CODE_NOT_STARTED,
    TAIL_LINES,
    ProcessGroup,
)
from sagemaker_mxnet_horovod.core.plan import LocalProcess

# Says it is ready (its SIGTERM handler, if any, installed), then sleeps.
SLEEPER = "import signal, sys, time\n{handler}\nprint('ready', file=sys.stderr, flush=True)\ntime.sleep(60)\n"


def process(name: str, role: str, code: str, **env) -> LocalProcess:
    return LocalProcess(name, role, (sys.executable, "-c", code), env, ".")


def sleeper(name: str, role: str, handler: str = "") -> LocalProcess:
    return process(name, role, SLEEPER.format(handler=handler))


def started(processes, **kwargs) -> tuple[ProcessGroup, list]:
    """A started group, once every sleeper in it said ready; the exits it reported, as a list."""
    exits, ready = [], threading.Semaphore(0)
    group = ProcessGroup(processes, dict(os.environ), on_exit=exits.append,
                         stderr_observers=(lambda index, text: text == "ready" and ready.release(),), **kwargs)
    group.start()
    for _ in [p for p in processes if "ready" in p.argv[-1]]:
        assert ready.acquire(timeout=30), "a process did not start within 30 s"
    return group, exits


def test_each_exit_is_reported_with_its_stderr_tail_and_output_is_tagged(capfd):
    code = ("import os, sys\nprint('epoch=1 loss=0.5', flush=True)\n"
            "for i in range(25): print(f'warning {i}', file=sys.stderr)\nsys.exit(int(os.environ['CODE']))")
    group, exits = started([process("worker 0", "worker", code, CODE="3"), process("worker 1", "worker", code,
                                                                                    CODE="0")])
    assert group.wait_ended(None, time.monotonic() + 30)
    by_name = {ended.name: ended for ended in exits}
    assert by_name["worker 0"].returncode == 3 and by_name["worker 1"].returncode == 0
    assert by_name["worker 0"].tail == tuple(f"warning {i}" for i in range(25 - TAIL_LINES, 25))
    assert (by_name["worker 0"].index, by_name["worker 0"].role) == (0, "worker")
    out, err = capfd.readouterr()
    assert "[worker 1] epoch=1 loss=0.5" in out.splitlines() and "[worker 0] warning 24" in err.splitlines()


def test_a_program_that_cannot_start_is_an_exit_saying_why():
    missing = LocalProcess("server 0", "server", ("/nonexistent/python", "-c", "pass"), {}, ".")
    group, exits = started([missing])
    assert [(ended.name, ended.returncode) for ended in exits] == [("server 0", EXIT_CODE_NOT_STARTED)]
    assert exits[0].tail == ("cannot start /nonexistent/python: No such file or directory",)
    assert group.running() == []


def test_stop_signals_the_roles_asked_for_and_kills_what_outlives_the_grace():
    group, exits = started([sleeper("server 0", "server"),
                            sleeper("worker 0", "worker", "signal.signal(signal.SIGTERM, signal.SIG_IGN)")])
    started_at = time.monotonic()
    assert group.stop({"worker"}, grace_s=0.5) is False  # it ignored SIGTERM: killed after the grace
    assert time.monotonic() - started_at < 10
    assert [(ended.name, ended.returncode) for ended in exits] == [("worker 0", -signal.SIGKILL)]
    assert group.running() == [0]  # the server was not asked
    assert group.stop({"server"}, grace_s=10) is True
    assert exits[-1].name == "server 0" and exits[-1].returncode == -signal.SIGTERM


def test_nothing_an_ended_process_started_outlives_the_end():
    # The process starts a child in its own session, says its pid, and exits: the child is left behind.
    code = ("import subprocess, sys\nchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(child.pid, file=sys.stderr, flush=True)")
    group, exits = started([process("worker 0", "worker", code)])
    assert group.wait_ended(None, time.monotonic() + 30)
    child = int(exits[0].tail[0])
    os.kill(child, 0)  # alive
    group.kill(None, sessions_of_ended=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.waitpid(child, os.WNOHANG)  # not ours to reap: ChildProcessError; the kernel reaps via init
        except ChildProcessError:
            pass
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)  # a SIGKILLed process disappears when its parent (init, here) reaps it
    raise AssertionError(f"process {child} survived its session's SIGKILL")

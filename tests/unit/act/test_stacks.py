"""stacks.py, as real processes: a rank started by rank_program answers STACK_SIGNAL with every thread's stack while its
main thread is blocked in a read, and goes on afterwards; the launcher's collection names a rank that does not
answer; a dump is written to files and the log, summary last; SIGUSR1 to a launcher and `train stacks` (its
client) bring a dump, and say so when there is no launcher."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from sagemaker_mxnet_horovod.act import stacks
from unit_helpers import unit_paths
from unit_helpers.live_output import wait_for_line
from unit_helpers.stack_launcher import start_launcher

SRC = unit_paths.SRC
# Blocks in os.read on stdin (native code: a Python signal handler would never run), then says it went on.
BLOCKED_RANK = textwrap.dedent("""
    import os, sys
    def wait_for_input():
        print("waiting", flush=True)
        return os.read(0, 1)
    wait_for_input()
    print("went on", flush=True)
""")


@pytest.fixture
def rank(tmp_path):
    """A rank as every backend starts it, through rank_program (rank 3 on algo-2), blocked in its read."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(BLOCKED_RANK)
    process = subprocess.Popen([sys.executable, "-m", "sagemaker_mxnet_horovod.act.rank_program", str(tmp_path / "run"),
                                str(tmp_path / "code"), "--", sys.executable, str(tmp_path / "code" / "train.py")],
                               env={**os.environ, "PYTHONPATH": str(SRC), "OMPI_COMM_WORLD_RANK": "3",
                                    "SM_CURRENT_HOST": "algo-2"},
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert wait_for_line(process.stdout, "waiting", 30), "the rank did not start within 30 s"
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_rank_blocked_in_native_code_answers_with_every_threads_stack_and_goes_on(tmp_path, rank):
    assert stacks.registered_ranks(tmp_path / "run") == {rank.pid: (3, "algo-2")}
    found = stacks.collect_local(tmp_path / "run", "dump-1")
    assert list(found) == [3]
    assert found[3].startswith(f"rank 3 on algo-2 (pid {rank.pid}), ")
    assert "Thread MainThread" in found[3] and "in wait_for_input\n" in found[3]  # in its read, or about to be
    assert "stack-dump" not in found[3]  # the dumping thread leaves itself out
    again = stacks.collect_local(tmp_path / "run", "dump-2")  # as often as asked
    assert "in wait_for_input" in again[3]
    rank.stdin.write("x")
    rank.stdin.close()
    assert rank.stdout.read() == "went on\n" and rank.wait(30) == 0  # the job was not stopped


def test_a_rank_that_does_not_answer_is_named(tmp_path):
    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # registered, no dumper
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ranks = tmp_path / "stacks" / "ranks"
        stacks.write_atomically(ranks / str(silent.pid), f"1 algo-1 {stacks.process_start(silent.pid)}\n")
        stacks.write_atomically(ranks / "999999999", "2 algo-1 5\n")  # gone: not asked
        stacks.write_atomically(ranks / str(bystander.pid), "3 algo-1 5\n")  # its pid, taken by another: spared
        started = time.monotonic()
        assert stacks.collect_local(tmp_path, "d", deadline_s=0.5) == {
            1: "rank 1 on algo-1: no stacks within 0.5 s (stuck while holding Python's GIL, or exiting)\n"}
        assert time.monotonic() - started < 5
        assert bystander.poll() is None
    finally:
        for process in (silent, bystander):
            process.kill()
            process.wait()
    assert stacks.collect_local(tmp_path / "nothing", "d") == {}  # no rank registered: nothing to wait for


def test_a_dump_goes_to_files_and_the_log_with_its_summary_last(tmp_path):
    logged = []
    directory = stacks.write_dump(tmp_path, "20251125T210501.123Z-signal", {
        "algo-2": {1: "rank 1 on algo-2\nThread MainThread:\n  File x\n"}, "algo-1": {0: "rank 0 on algo-1\n"}},
        "SIGUSR1", logged.append)
    assert sorted(p.name for p in directory.iterdir()) == ["algo-1-rank-0.txt", "algo-2-rank-1.txt", "summary.txt"]
    assert (directory / "summary.txt").read_text() == (
        "20251125T210501.123Z-signal: SIGUSR1: rank 0 on algo-1, rank 1 on algo-2\n")
    assert logged[0] == "stacks of rank 0 on algo-1 (SIGUSR1):\nrank 0 on algo-1"
    assert logged[-1] == f"stacks written to {directory}: rank 0 on algo-1, rank 1 on algo-2"
    silent = stacks.write_dump(tmp_path, "20251125T210502.000Z-signal", {"algo-1": {}}, "x", logged.append,
                               silent_hosts=["algo-3", "algo-2"])
    assert (silent / "summary.txt").read_text() == (
        "20251125T210502.000Z-signal: x: no Python rank was running; no answer from algo-2, algo-3\n")
    assert stacks.is_dump_name("20251125T210502.000Z-signal") and not stacks.is_dump_name("../../etc")


def test_dump_names_sort_by_time_and_carry_the_reason():
    assert stacks.dump_name("Horovod's first stall warning", 1764104701.123) == (
        "20251125T210501.123Z-horovod-s-first-stall-warning")
    assert stacks.dump_name("SIGUSR1, asked on algo-2", 1764104701.5).endswith(".500Z-sigusr1")
    assert stacks.dump_name("a hang watch ends the job: worker algo-2 went away", 0).endswith(
        "Z-a-hang-watch-ends-the-job")


def test_train_stacks_asks_the_launcher_and_prints_the_dump(tmp_path, rank, capsys):
    launcher = start_launcher(tmp_path / "run", tmp_path / "out")
    try:
        assert stacks.launcher_pid(tmp_path / "run") == launcher.pid
        assert stacks.request_and_show(tmp_path / "run", tmp_path / "out") == 0
        shown = capsys.readouterr().out
        assert "===== algo-1-rank-3.txt\nrank 3 on algo-2" in shown and "in wait_for_input" in shown
        assert shown.rstrip().endswith(": SIGUSR1: rank 3 on algo-1")
    finally:
        launcher.kill()
        launcher.wait()
    assert rank.poll() is None  # still running


def test_train_stacks_without_a_launcher_says_so(tmp_path, capsys):
    assert stacks.request_and_show(tmp_path / "run", tmp_path / "out") == 1
    assert "train stacks: no train launcher is running in this container" in capsys.readouterr().err


@pytest.mark.usefixtures("restore_signal_handlers")
def test_a_request_before_the_job_runs_is_said_and_stops_nothing(tmp_path):
    said = []
    stacks.serve_requests(tmp_path, None, said.append)
    assert stacks.launcher_pid(tmp_path) == os.getpid()
    os.kill(os.getpid(), signal.SIGUSR1)  # Python's default for SIGUSR1: end the process
    deadline = time.monotonic() + 10
    while not said and time.monotonic() < deadline:
        time.sleep(0.01)  # the handler runs in the main thread, between two bytecodes
    assert said == ["stacks asked for (SIGUSR1) before the job started: none to write"]

"""progress.py: the per-rank progress watch (mpi_progress_timeout_s): what counts as progress, where a thread
blocks, and a real hung Python rank that ends itself with the cause. Turning its line into the failure's cause:
test_hangs.py."""

import os
import subprocess
import sys
import textwrap
import threading
import time

from sagemaker_mxnet_horovod.diagnose.progress import (
    EXIT_CODE,
    ProgressWatch,
    describe_frame,
    waiting_on_engine,
)
from unit_helpers import unit_paths
from unit_helpers.stack_launcher import start_launcher

SRC = unit_paths.SRC


def test_watch_tracks_progress_and_the_last_line():
    watch = ProgressWatch(10, rank=1, host="algo-2", now=0)
    watch.saw_output("epoch 1", now=1)
    watch.saw_output("\n", now=1)
    watch.saw_output("\n  \n", now=2)
    watch.saw_collective("allreduce", now=5)
    assert not watch.expired(15, busy=False)
    assert watch.expired(15.5, busy=False)
    assert watch.message(16, "blocked in x.py:3 (read)") == (
        "train: no progress: rank 1 on algo-2 wrote no output, started no collective and did not compute for 10 s "
        "(mpi_progress_timeout_s); blocked in x.py:3 (read); last output 15 s ago: 'epoch 1'; "
        "last Horovod call: allreduce")


def test_busy_counts_as_alive():
    watch = ProgressWatch(10, rank=0, host="algo-1", now=0)
    assert not watch.expired(100, busy=True)  # computing, or waiting on a collective: the stall timeout's to end
    assert not watch.expired(105, busy=False)
    assert watch.expired(111, busy=False)


def blocked_frame(tmp_path, relative, function):
    """A real thread blocked in `function` defined in a file at tmp_path/relative; returns its frame."""
    path = tmp_path / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"def {function}(event):\n    event.wait()\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - a frame with that file name
    event = threading.Event()
    thread = threading.Thread(target=namespace[function], args=(event,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while (frame := function_frame(thread, str(path))) is None:  # until the thread is in `function`'s wait
        assert time.monotonic() < deadline, f"the thread did not block in {function} within 10 s"
        time.sleep(0.005)  # a thread's frames change without a notification
    return frame, event


def function_frame(thread, filename):
    """The frame of the function defined in `filename` when the thread blocks below it, in a wait (threading.py's
    frames inside event.wait); else None."""
    inner = sys._current_frames().get(thread.ident)
    if inner is None or inner.f_code.co_name != "wait":
        return None
    frame = inner
    while frame is not None and frame.f_code.co_filename != filename:
        frame = frame.f_back
    return frame


def test_engine_waits_are_recognised_by_where_the_thread_blocks(tmp_path):
    frame, event = blocked_frame(tmp_path, "lib/python3.11/site-packages/mxnet/ndarray/ndarray.py", "asnumpy")
    assert waiting_on_engine(frame)
    event.set()
    frame, event = blocked_frame(tmp_path, "lib/python3.11/site-packages/horovod/common/basics.py", "init")
    assert waiting_on_engine(frame)
    event.set()
    frame, event = blocked_frame(tmp_path, "code/train.py", "read_batch")
    assert not waiting_on_engine(frame)
    assert describe_frame(frame) == "blocked in train.py:2 (read_batch)"
    event.set()


def run_watched(tmp_path, program: str, env=None) -> subprocess.CompletedProcess:
    """A Python program as rank 1 on algo-2 under rank_program with a 1 s progress timeout (env: more variables)."""
    script = tmp_path / "hang.py"
    script.write_text(textwrap.dedent(program))
    return subprocess.run([sys.executable, "-m", "sagemaker_mxnet_horovod.act.rank_program", str(tmp_path), str(tmp_path), "--",
                           sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(SRC), "SMMH_PROGRESS_TIMEOUT_S": "1",
                               "OMPI_COMM_WORLD_RANK": "1", "SM_CURRENT_HOST": "algo-2", **(env or {})})


# The main thread waits in MXNet's wait_to_read (a function of that name in a file under mxnet/, blocked in a C call
# as MXNet's is) until release(); `engine` runs in another thread meanwhile, as MXNet's engine threads do.
ENGINE_WAIT = """\
    import os, threading, time
    read_end, write_end = os.pipe()
    def release():
        os.write(write_end, b"x")
    mxnet = {}
    exec(compile("import os\\ndef wait_to_read(fd):\\n    os.read(fd, 1)\\n",
                 "/venv/lib/python3.11/site-packages/mxnet/ndarray/ndarray.py", "exec"), mxnet)
    def engine():
        ENGINE
    threading.Thread(target=engine, daemon=True).start()
    mxnet["wait_to_read"](read_end)
"""
# Twice the 1 s timeout: the watch, polling every 0.2 s, would have ended the rank by then.
IDLE_FOR_2_S = "time.sleep(2); release()"  # a collective's or a peer's result, after 2 s of nothing
COMPUTING_FOR_2_S = "end = time.monotonic() + 2\n        while time.monotonic() < end: sum(range(10000))\n        release()"
PS_WORKER = {"DMLC_ROLE": "worker", "SMMH_WORKER_RANK": "1"}


def test_an_mpi_rank_waiting_on_the_engine_is_left_alone(tmp_path):
    # Horovod's stall inspector ends a collective nobody completes: the progress watch leaves such a wait alone.
    done = run_watched(tmp_path, engine_wait(IDLE_FOR_2_S))
    assert (done.returncode, done.stderr) == (0, "")


def test_a_parameter_server_worker_waiting_on_an_idle_engine_ends_itself(tmp_path):
    # A server that never answers: the worker waits on the engine, every thread idle (no stall inspector here).
    started = time.monotonic()
    done = run_watched(tmp_path, engine_wait("pass"), PS_WORKER)
    assert done.returncode == EXIT_CODE and time.monotonic() - started < 20
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("train: no progress: rank 1 on algo-2 wrote no output, started no collective and did not "
                           "compute for 1 s")
    assert "blocked in ndarray.py:3 (wait_to_read) called from hang.py:" in last


def test_a_parameter_server_worker_waiting_on_a_computing_engine_is_left_alone(tmp_path):
    done = run_watched(tmp_path, engine_wait(COMPUTING_FOR_2_S), PS_WORKER)
    assert (done.returncode, done.stderr.strip().splitlines()[-1:]) == (
        0, ["train: the script returned; waiting in ps-lite's barrier at exit for every other worker"])


def engine_wait(engine: str) -> str:
    return ENGINE_WAIT.replace("ENGINE", engine)


def test_a_silently_computing_rank_is_left_alone(tmp_path):
    done = run_watched(tmp_path, """\
        import time
        end = time.monotonic() + 2
        while time.monotonic() < end:
            sum(range(10000))
    """)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_hung_python_rank_ends_itself_with_the_cause(tmp_path):
    started = time.monotonic()
    done = run_watched(tmp_path, """\
        import os, threading
        print("rank 1: reading the next batch", flush=True)
        threading.Event().wait()
    """)
    assert done.returncode == EXIT_CODE
    assert time.monotonic() - started < 20  # fails fast (a 1 s progress timeout): a generous bound
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("train: no progress: rank 1 on algo-2 wrote no output, started no collective and "
                           "did not compute for 1 s")
    assert "blocked in threading.py:" in last and "called from hang.py:3 (<module>)" in last
    assert last.endswith("'rank 1: reading the next batch'")


# Horovod's MXNet module where the watch looks for it (horovod/mxnet/mpi_ops.py): each collective looks up its C
# function on one library handle, MPI_MXNET_LIB_CTYPES, as Horovod 0.28.1's does; here the function returns at once.
MPI_OPS = """\
class Library:
    def horovod_mxnet_allreduce_async(self, *args):
        return 0
MPI_MXNET_LIB_CTYPES = Library()
def allreduce():
    return MPI_MXNET_LIB_CTYPES.horovod_mxnet_allreduce_async()
"""


def test_a_horovod_call_counts_as_progress_and_the_hung_rank_names_its_last(tmp_path):
    # Twice the timeout with no output and no computing, only an allreduce every 0.2 s: the rank is alive (else the
    # watch ends it then, with no output yet). Then it prints and blocks: ended, naming its last Horovod call.
    package = tmp_path / "site" / "horovod" / "mxnet"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "mpi_ops.py").write_text(MPI_OPS)
    done = run_watched(tmp_path, """\
        import threading, time
        from horovod.mxnet import mpi_ops
        end = time.monotonic() + 2
        while time.monotonic() < end:
            mpi_ops.allreduce()
            time.sleep(0.2)
        print("rank 1: reading the next batch", flush=True)
        threading.Event().wait()
    """, {"PYTHONPATH": os.pathsep.join((str(SRC), str(tmp_path / "site")))})
    assert done.returncode == EXIT_CODE, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "called from hang.py:8 (<module>)" in last, last
    assert last.endswith("'rank 1: reading the next batch'; last Horovod call: allreduce"), last


def test_a_hung_rank_has_the_launcher_take_every_ranks_stacks_before_it_ends(tmp_path):
    launcher = start_launcher(tmp_path, tmp_path / "out")
    try:
        done = run_watched(tmp_path, """\
            import threading
            def read_next_batch():
                threading.Event().wait()
            read_next_batch()
        """)
        # The rank ends once its own stacks are taken; the launcher writes the dump a moment later.
        deadline = time.monotonic() + 20
        while not list((tmp_path / "out").glob("*/summary.txt")) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        launcher.kill()
        launcher.wait()
    assert done.returncode == EXIT_CODE and "train: no progress: rank 1 on algo-2" in done.stderr, done.stderr
    (dump,) = (tmp_path / "out").iterdir()
    assert dump.name.endswith("-no-progress-on-rank-1")
    assert "in read_next_batch" in (dump / "algo-1-rank-1.txt").read_text()


SRC = unit_paths.SRC

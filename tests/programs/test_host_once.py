"""host_once.once_per_host: local rank 0 does the work, its host's other ranks load its result or report its error.

Real processes (one per local rank, forked), real files in a temporary share directory; no MPI needed."""

import multiprocessing
import os
import time

import pytest
from mxnet_programs import host_once
from mxnet_programs.process import ProgramError, Stopped, StopRequest
from mxnet_programs.sagemaker_env import DistEnv

LOCAL_SIZE = 3


def work(calls_dir, value, awaited=()):
    """The work: records that it ran (a file per call, so calls from any process are counted), waits for the files
    `awaited` (other ranks' doing), and returns value."""
    def run():
        with open(os.path.join(calls_dir, f"call-{os.getpid()}"), "w"):
            pass
        deadline = time.monotonic() + 30
        while not all(os.path.exists(path) for path in awaited):
            if time.monotonic() > deadline:
                raise AssertionError(f"the other ranks did not start waiting within 30 s: {awaited}")
            time.sleep(0.01)  # another process's doing: nothing to be notified by
        if isinstance(value, Exception):
            raise value
        return value

    return run


class WaitSeen:
    """A stop never requested that marks, the first time a waiting rank asks for it, that the rank is in its wait (it
    asks on each poll for the result)."""

    def __init__(self, mark):
        self.mark = mark

    @property
    def requested(self):
        if not os.path.exists(self.mark):
            open(self.mark, "w").close()
        return False


def rank_main(local_rank, environ, calls_dir, value, results, waits):
    """One local rank; with `waits` (a directory), local rank 0 works once every other rank is in its wait."""
    env = DistEnv(rank=local_rank, size=LOCAL_SIZE, local_rank=local_rank, local_size=LOCAL_SIZE)
    marks = [os.path.join(waits, f"waiting-{rank}") for rank in range(1, LOCAL_SIZE)] if waits else []
    fn = work(calls_dir, value, marks if local_rank == 0 else ())
    stop = WaitSeen(marks[local_rank - 1]) if waits and local_rank > 0 else None
    try:
        got = host_once.once_per_host("inputs", fn, env, "read the inputs", stop=stop, environ=environ,
                                      deadline_s=30.0)
        results.put((local_rank, "ok", got))
    except ProgramError as exc:
        results.put((local_rank, "error", (str(exc), exc.exit_code)))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        results.put((local_rank, "raised", f"{type(exc).__name__}: {exc}"))


def run_ranks(tmp_path, value, ranks=range(LOCAL_SIZE), others_wait_first=False):
    """Runs the local ranks as processes; {rank: outcome}. others_wait_first: local rank 0 works only once every
    other rank waits for its result."""
    environ = {"TMPDIR": str(tmp_path / "tmp"), "PMIX_NAMESPACE": "job-1"}
    calls = tmp_path / "calls"
    calls.mkdir()
    waits = tmp_path / "waits" if others_wait_first else None
    if waits:
        waits.mkdir()
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    processes = {r: context.Process(target=rank_main, args=(r, environ, str(calls), value, results,
                                                            str(waits) if waits else None))
                 for r in ranks}
    for process in processes.values():
        process.start()
    outcomes = {}
    for _ in processes:
        rank, kind, payload = results.get(timeout=60)
        outcomes[rank] = (kind, payload)
    for process in processes.values():
        process.join(30)
    return outcomes, sorted(os.listdir(calls)), environ


def test_one_rank_on_the_host_runs_the_work_itself(tmp_path):
    env = DistEnv(rank=5, size=8, local_rank=0, local_size=1)
    assert host_once.once_per_host("x", lambda: 42, env, "work", environ={"TMPDIR": str(tmp_path)}) == 42
    assert not (tmp_path / "mxnet-programs-once").exists()


def test_local_rank_0_works_once_and_every_rank_gets_its_result(tmp_path):
    value = {"images": list(range(1000)), "split": "train2017"}
    outcomes, calls, environ = run_ranks(tmp_path, value, others_wait_first=True)
    assert outcomes == {r: ("ok", value) for r in range(LOCAL_SIZE)}
    assert len(calls) == 1, calls  # rank 0 only
    share = host_once.share_dir(environ)
    assert os.listdir(share) == [], "the last reader leaves no file behind"


def test_an_error_of_local_rank_0_is_every_rank_s_error(tmp_path):
    outcomes, calls, _ = run_ranks(tmp_path, ProgramError("image referenced but absent: /x.jpg", exit_code=2))
    assert outcomes == {r: ("error", ("image referenced but absent: /x.jpg", 2)) for r in range(LOCAL_SIZE)}
    assert len(calls) == 1


def test_an_unexpected_failure_of_local_rank_0_names_it_on_the_other_ranks(tmp_path):
    outcomes, _, _ = run_ranks(tmp_path, ValueError("boom"))
    assert outcomes[0] == ("raised", "ValueError: boom")
    for rank in (1, 2):
        assert outcomes[rank] == ("error", ("local rank 0 of this host failed: ValueError: boom", 1))


def test_a_waiting_rank_gives_up_at_its_deadline_naming_what_it_waited_for(tmp_path):
    env = DistEnv(rank=1, size=2, local_rank=1, local_size=2)
    environ = {"TMPDIR": str(tmp_path), "PMIX_NAMESPACE": "job-2"}
    start = time.monotonic()
    with pytest.raises(ProgramError, match=r"waited 0.3 s for local rank 0 of this host to read the inputs"):
        host_once.once_per_host("inputs", lambda: 1, env, "read the inputs", environ=environ, deadline_s=0.3)
    assert time.monotonic() - start < 5


def test_a_waiting_rank_stops_on_sigterm(tmp_path):
    env = DistEnv(rank=1, size=2, local_rank=1, local_size=2)
    stop = StopRequest()
    stop.set()
    with pytest.raises(Stopped, match="while waiting for local rank 0 to read the inputs"):
        host_once.once_per_host("inputs", lambda: 1, env, "read the inputs", stop=stop,
                                environ={"TMPDIR": str(tmp_path), "PMIX_NAMESPACE": "job-3"})


def test_launches_do_not_share_results(tmp_path):
    first = host_once.share_dir({"TMPDIR": str(tmp_path), "PMIX_NAMESPACE": "prterun-a/1"})
    second = host_once.share_dir({"TMPDIR": str(tmp_path), "PMIX_NAMESPACE": "prterun-b/1"})
    assert first != second and os.path.dirname(first) == os.path.dirname(second)

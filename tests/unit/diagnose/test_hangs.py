"""hangs.py: the cause of a hang in the failure file: Horovod's stall report (as mpirun delivered it in a real
2-rank stall), Pipe mode's likely cause, the progress watch's line (the watch itself: test_progress.py)."""

import json

from sagemaker_mxnet_horovod.backends.mpi.output import MPIRUN
from sagemaker_mxnet_horovod.diagnose.hangs import (
    StallLog,
    hang_cause,
    pipe_channels,
    progress_cause,
    stall_cause,
)

# Rank 0's lines of mpirun's stderr, each after its leading tag "[1,0]<stderr>:": Horovod 0.28.1 writes its log
# message in pieces, which mpirun tags mid-line. A warning at the check time, then the shutdown.
HOROVOD_STALL_MPIRUN = [
    "[[1,0]<stderr>:2026-11-23 13:25:48[1,0]<stderr>:.[1,0]<stderr>:357253[1,0]<stderr>:: [1,0]<stderr>:W"
    "[1,0]<stderr>: [1,0]<stderr>:/tmp/pip-install/horovod/common/stall_inspector.cc[1,0]<stderr>::[1,0]<stderr>:107"
    "[1,0]<stderr>:] [1,0]<stderr>:One or more tensors were submitted to be reduced, gathered or broadcasted by "
    "subset of ranks and are waiting for remainder of ranks for more than 4 seconds. ",
    "Missing ranks:",
    "1: [horovod_allreduce.step0][1,0]<stderr>:",
    "3: [horovod_allreduce.step0, horovod_allreduce.step1][1,0]<stderr>:",
    "[[1,0]<stderr>:2026-11-23 13:25:52[1,0]<stderr>:.[1,0]<stderr>:361498[1,0]<stderr>:: [1,0]<stderr>:E ...",
    "Missing ranks:",
    "1!: [horovod_allreduce.step0]",
    "3!: [horovod_allreduce.step0, horovod_allreduce.step1]",
    '2: [horovod_broadcast.b0]',
    'One or more rank (marked by "!") is stalled for longer than 8 seconds. Will shutdown.[1,0]<stderr>:',
    "Traceback (most recent call last):",
    "mxnet.base.MXNetError: MXNetError: Horovod has been shut down. This was caused by an exception on one of ...",
]


def rank_0_lines(pieces):
    """Rank 0's lines as supervise.JobProcess hands them over: mpirun's stderr cut by the MPI backend's reader."""
    reader = MPIRUN.lines("stderr")
    return [line.text for piece in pieces for line in reader.feed(f"[1,0]<stderr>:{piece}\n".encode())]


HOROVOD_STALL_STDERR = rank_0_lines(HOROVOD_STALL_MPIRUN)
RANK_HOSTS = ("algo-1", "algo-1", "algo-2", "algo-2")


def stall_log(lines):
    log = StallLog()
    for line in lines:
        log.observe(0, line)
    return log


def test_stall_names_the_ranks_past_the_timeout_their_hosts_and_tensors():
    cause = stall_cause(stall_log(HOROVOD_STALL_STDERR), RANK_HOSTS, [])
    assert cause == ("Horovod stall: ranks 1 on algo-1, 3 on algo-2 never submitted horovod_allreduce.step0, "
                     "horovod_allreduce.step1, which the other ranks waited on for more than 8 s "
                     "(horovod_stall_timeout_s); Horovod shut down and the job was ended")


def test_warnings_alone_are_no_cause():
    assert stall_cause(stall_log(HOROVOD_STALL_STDERR[:4]), RANK_HOSTS, []) is None


def test_the_first_complete_report_is_announced_once():
    # The launcher takes every rank's stacks then: Horovod's shutdown, later, ends ranks at once.
    reports = []
    log = StallLog(on_first_report=lambda: reports.append(len(lines_seen)))
    lines_seen = []
    for line in HOROVOD_STALL_STDERR:
        lines_seen.append(line)
        log.observe(0, line)
    assert reports == [5]  # at the line after the first block's last rank: the warning, before the shutdown


def test_pipe_mode_adds_the_likely_cause_and_the_fix():
    config = json.dumps({"train": {"TrainingInputMode": "Pipe"}, "test": {"TrainingInputMode": "File"}})
    assert pipe_channels(config) == ["train"]
    assert pipe_channels("not json") == [] and pipe_channels(None) == []
    cause = hang_cause(stall_log(HOROVOD_STALL_STDERR), {0: HOROVOD_STALL_STDERR}, RANK_HOSTS,
                       {"SM_INPUT_DATA_CONFIG": config})
    assert "Channel train is in Pipe mode: each is one FIFO with one reader" in cause
    assert cause.endswith("Give each rank its own channel (train_0, train_1, ...: one S3 prefix per rank)")


def test_progress_cause_is_the_watch_line_of_the_rank_it_ended():
    line = ("train: no progress: rank 1 on algo-2 wrote no output, started no collective and did not compute "
            "for 10 s (mpi_progress_timeout_s); blocked in x.py:3 (<module>); no output yet")
    stderr = {0: ["MXNetError: ... peer process has unexpectedly disconnected"], 1: ["warming up", line]}
    assert progress_cause(stderr) == line.removeprefix("train: ")
    assert hang_cause(StallLog(), stderr, RANK_HOSTS, {}).startswith("no progress: rank 1 on algo-2")
    assert progress_cause({0: ["anything else"]}) is None

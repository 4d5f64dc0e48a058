"""rank_tags.py: mpirun's tagged output cut into each rank's whole lines (pieces of one line tagged one by one, a
piece without its newline followed by another rank's on the same line), mpirun's own lines apart, no tag left in a
line's text, the tag kept for the console; and what the run makes of them (act/supervise.JobProcess with the MPI
backend's reader: act/test_supervise.py)."""

from sagemaker_mxnet_horovod.backends.mpi.rank_tags import RankLines
from sagemaker_mxnet_horovod.core.failure import Failure
from sagemaker_mxnet_horovod.diagnose.job_output import RankLine


def feed(lines: RankLines, *raw: bytes) -> list[tuple]:
    return [(line.rank, line.stream, line.text) for chunk in raw for line in lines.feed(chunk)]


def test_a_whole_tagged_line_and_mpiruns_own():
    lines = RankLines("stdout")
    assert feed(lines, b"[1,0]<stdout>:epoch=1 loss=0.5\n", b"mpirun: a message of its own\n") == [
        (0, "stdout", "epoch=1 loss=0.5"), (None, "stdout", "mpirun: a message of its own")]


def test_pieces_of_one_line_tagged_mid_line_make_one_line():
    # Horovod 0.28.1 writes its log message in pieces (captured: tests/unit/diagnose/test_hangs.py).
    lines = RankLines("stderr")
    assert feed(lines, b"[1,0]<stderr>:[[1,0]<stderr>:2026-11-23 13:25:48[1,0]<stderr>:: W stall_inspector.cc\n",
                b"[1,0]<stderr>:1: [horovod_allreduce.step0][1,0]<stderr>:\n") == [
        (0, "stderr", "[2026-11-23 13:25:48: W stall_inspector.cc"), (0, "stderr", "1: [horovod_allreduce.step0]")]


def test_a_ranks_unfinished_piece_waits_for_its_newline_while_another_ranks_line_passes():
    lines = RankLines("stdout")
    assert feed(lines, b"[1,0]<stdout>:progress 50%[1,1]<stdout>:rank 1 done\n") == [(1, "stdout", "rank 1 done")]
    assert feed(lines, b"[1,0]<stdout>:, 100%\n") == [(0, "stdout", "progress 50%, 100%")]


def test_a_line_never_finished_is_flushed_at_the_end_with_its_tag():
    lines = RankLines("stdout")
    assert feed(lines, b"[1,3]<stdout>:no newline[1,2]<stdout>:x\n") == [(2, "stdout", "x")]
    assert lines.flush() == [RankLine(3, "stdout", "no newline", b"[1,3]<stdout>:")]
    assert lines.flush() == []


def test_console_bytes_keep_mpiruns_tag_so_metric_lines_look_as_before():
    (line,) = RankLines("stdout").feed(b"[1,0]<stdout>:epoch=1[1,0]<stdout>: loss=0.5\n")
    assert line.console_bytes() == b"[1,0]<stdout>:epoch=1 loss=0.5\n"


def test_a_failures_tail_cut_from_mpiruns_output_holds_no_tag():
    # Pieces of one line tagged mid-line: the failure file shows the line whole, without mpirun's tags.
    (line,) = RankLines("stderr").feed(b"[1,1]<stderr>:part one [1,1]<stderr>:part two\n")
    failure = Failure("cause", tail_title="rank 1 stderr", tail=(line.text,))
    assert failure.render().splitlines()[-1] == "part one part two"

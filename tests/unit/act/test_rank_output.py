"""rank_output.py: mpirun's tagged output cut into each rank's whole lines (pieces of one line tagged one by one, a
piece without its newline followed by another rank's on the same line), each rank's log file, and which lines the
console shows."""

from sagemaker_mxnet_horovod.act.rank_output import RankLine, RankLines, RankLogs, shown


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


def test_which_lines_reach_the_console():
    assert shown(RankLine(3, "stdout", "x"), None) and shown(RankLine(None, "stderr", "mpirun"), frozenset())
    assert shown(RankLine(0, "stdout", "x"), frozenset({0})) and not shown(RankLine(1, "stdout", "x"), frozenset({0}))


def test_each_ranks_log_is_named_for_its_host_and_written_as_it_arrives(tmp_path):
    logs = RankLogs(tmp_path / "logs", ("algo-1", "algo-1", "algo-2"))
    logs.write(2, "rank 2: one")
    assert (tmp_path / "logs" / "algo-2-rank-2.log").read_text() == "rank 2: one\n"  # line-buffered
    logs.write(0, "rank 0: one")
    logs.write(2, "rank 2: two")
    logs.close()
    logs.write(2, "after the end")  # a pump still running: never reopens (and empties) the file
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["algo-1-rank-0.log", "algo-2-rank-2.log"]
    assert (tmp_path / "logs" / "algo-2-rank-2.log").read_text() == "rank 2: one\nrank 2: two\n"


def test_a_log_that_cannot_be_written_is_said_once_and_stops_nothing(tmp_path, capfd):
    (tmp_path / "logs").write_text("a file where the directory should be")
    logs = RankLogs(tmp_path / "logs", ("algo-1",))
    logs.write(0, "one")
    logs.write(0, "two")
    assert capfd.readouterr().err.count("train: per-rank logs stopped: cannot write") == 1

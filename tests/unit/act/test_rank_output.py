"""rank_output.py: each rank's log file, and which lines the console shows (the lines as a reader cut them: mpirun's,
backends/mpi/test_rank_tags.py; the program's, diagnose/test_job_output.py)."""

from sagemaker_mxnet_horovod.act.rank_output import RankLogs, shown
from sagemaker_mxnet_horovod.diagnose.job_output import RankLine


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

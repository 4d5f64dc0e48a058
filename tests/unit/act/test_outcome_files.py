"""outcome_files.py: this host's outcome files: the failure file written atomically within SageMaker's limit,
the user's own text kept in front of the launcher's diagnosis and other hosts' texts after it; an earlier run's
outcome cleared, this run's success written; files written where SageMaker would not upload them copied into
output/data, never over the job's own."""

from sagemaker_mxnet_horovod.act.outcome_files import (
    clear_previous_outcome,
    copy_stray_outputs,
    read_user_failure,
    write_failure,
    write_failure_file,
    write_success,
)
from sagemaker_mxnet_horovod.core.failure import FAILURE_LIMIT, LAUNCHER_PREFIX, Failure, compose_failure
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.plan.stray_outputs import find_stray_outputs

DIAGNOSIS = ("rank 1 on algo-2 exited with code 1: ValueError: bad batch\n"
             "--- last lines of rank 1 stderr ---\nTraceback (most recent call last):\nValueError: bad batch")


def test_write_failure_is_atomic_and_bounded(tmp_path):
    path = tmp_path / "output" / "failure"
    write_failure(path, "cause\n" + "y" * 4000)
    text = path.read_text()
    assert text.startswith("cause") and len(text) <= FAILURE_LIMIT + 1
    assert [p.name for p in path.parent.iterdir()] == ["failure"]


def test_read_user_failure(tmp_path):
    path = tmp_path / "failure"
    assert read_user_failure(path) is None
    path.write_text("  \n")
    assert read_user_failure(path) is None
    path.write_bytes(b"bad \xff byte\n" + b"x" * 5000)
    text = read_user_failure(path)
    assert text.startswith("bad \ufffd byte") and len(text) <= FAILURE_LIMIT


def test_a_kept_user_text_survives_the_launchers_write(tmp_path):
    path = tmp_path / "failure"
    path.write_text("my script's reason\n")
    write_failure(path, compose_failure(DIAGNOSIS, [(None, read_user_failure(path))]))
    assert path.read_text().splitlines()[:2] == ["my script's reason", LAUNCHER_PREFIX + DIAGNOSIS.splitlines()[0]]


def test_clear_previous_outcome_and_write_success(tmp_path):
    output = tmp_path / "output"
    assert clear_previous_outcome(output) == []
    output.mkdir()
    (output / "failure").write_text("old reason\nmore")
    (output / "success").write_text("")
    (output / "data").mkdir()
    removed = clear_previous_outcome(output)
    assert removed == [f"{output / 'failure'} (old reason)", f"{output / 'success'}"]
    assert sorted(p.name for p in output.iterdir()) == ["data"]
    assert write_success(output) == output / "success"
    assert (output / "success").read_text() == ""


def test_the_failure_file_holds_this_hosts_user_text_then_other_hosts_then_the_diagnosis(tmp_path):
    path = tmp_path / "output" / "failure"
    path.parent.mkdir()
    path.write_text("my script's reason\n")
    failure = Failure("rank 1 on algo-2 exited with code 1: ValueError: bad batch", exit_code=1)
    written = write_failure_file(path, failure, [("algo-2", "their reason"), ("algo-3", None)])
    assert path.read_text() == written + "\n"
    assert written.splitlines() == ["my script's reason", "[algo-2] their reason",
                                    LAUNCHER_PREFIX + "rank 1 on algo-2 exited with code 1: ValueError: bad batch"]


def test_copy_stray_outputs(tmp_path):
    paths = Paths(tmp_path)
    (tmp_path / "output" / "data").mkdir(parents=True)
    (tmp_path / "output" / "timeline.json").write_text("[]")
    (tmp_path / "output" / "kept.csv").write_text("new")
    (tmp_path / "output" / "data" / "kept.csv").write_text("the job's own")
    strays = find_stray_outputs(paths, {"A": f"{tmp_path}/output/timeline.json", "B": f"{tmp_path}/output/kept.csv",
                                        "C": f"{tmp_path}/output/absent"}, {})
    logged = []
    copy_stray_outputs(tuple(strays), logged.append)
    assert (tmp_path / "output" / "data" / "timeline.json").read_text() == "[]"
    assert (tmp_path / "output" / "data" / "kept.csv").read_text() == "the job's own"  # never overwritten
    assert not (tmp_path / "output" / "data" / "absent").exists()
    assert len(logged) == 2 and "already exists" in logged[1]

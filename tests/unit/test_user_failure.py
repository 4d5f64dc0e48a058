"""The user's own failure text kept in front of the launcher's diagnosis, within SageMaker's 1024 characters;
the outcome files (success, failure) of an earlier run cleared, this run's written."""

from sagemaker_mxnet_horovod.failure import (
    FAILURE_LIMIT,
    LAUNCHER_HEAD_ROOM,
    LAUNCHER_PREFIX,
    USER_TEXT_CUT,
    clear_previous_outcome,
    compose_failure,
    read_user_failure,
    write_failure,
    write_success,
)

DIAGNOSIS = ("rank 1 on algo-2 exited with code 1: ValueError: bad batch\n"
             "--- last lines of rank 1 stderr ---\nTraceback (most recent call last):\nValueError: bad batch")


def test_no_user_text_leaves_the_diagnosis_unchanged():
    assert compose_failure(DIAGNOSIS, []) == DIAGNOSIS
    assert compose_failure(DIAGNOSIS, [(None, None), ("algo-2", ""), (None, " \n ")]) == DIAGNOSIS


def test_user_text_first_then_the_launchers_diagnosis():
    message = compose_failure(DIAGNOSIS, [(None, "Data channel 'train' is empty\n")])
    assert message == f"Data channel 'train' is empty\n{LAUNCHER_PREFIX}{DIAGNOSIS}"


def test_other_hosts_texts_are_labelled_with_their_host_after_this_hosts():
    message = compose_failure(DIAGNOSIS, [(None, "mine"), ("algo-2", "theirs"), ("algo-3", None)])
    assert message.splitlines()[:3] == ["mine", "[algo-2] theirs", LAUNCHER_PREFIX + DIAGNOSIS.splitlines()[0]]


def test_long_user_text_is_cut_so_the_launchers_first_line_shows():
    user = "E" * 5000
    message = compose_failure(DIAGNOSIS, [(None, user)])
    assert len(message) <= FAILURE_LIMIT
    first, second = message.splitlines()[:2]
    assert first.startswith("EEEE") and first.endswith(USER_TEXT_CUT)
    assert second == LAUNCHER_PREFIX + DIAGNOSIS.splitlines()[0]


def test_long_user_text_and_long_diagnosis_keep_both_heads_and_the_newest_detail():
    user = "\n".join(f"user line {i}" for i in range(300))
    diagnosis = "rank 0 on algo-1 exited with code 1: OSError: disk full\n" + "\n".join(
        f"stderr line {i}" for i in range(300))
    message = compose_failure(diagnosis, [(None, user)])
    assert len(message) <= FAILURE_LIMIT
    lines = message.splitlines()
    assert lines[0] == "user line 0"
    assert LAUNCHER_PREFIX + "rank 0 on algo-1 exited with code 1: OSError: disk full" in lines
    assert lines[-1] == "stderr line 299"


def test_a_very_long_launcher_first_line_gets_its_reserved_room_and_the_user_the_rest():
    diagnosis = "mpirun exited with code 1: " + "x" * 3000
    message = compose_failure(diagnosis, [(None, "U" * 3000)])
    assert len(message) <= FAILURE_LIMIT
    user, launcher = message.split("\n")
    assert launcher.startswith(LAUNCHER_PREFIX + "mpirun exited with code 1: xxx")
    assert len(launcher) >= LAUNCHER_HEAD_ROOM
    assert len(user) >= FAILURE_LIMIT - LAUNCHER_HEAD_ROOM - 1


def test_short_texts_fill_exactly_up_to_the_limit_without_cuts():
    user = "u" * 600
    diagnosis = "d" * (FAILURE_LIMIT - 600 - 1 - len(LAUNCHER_PREFIX))
    message = compose_failure(diagnosis, [(None, user)])
    assert message == f"{user}\n{LAUNCHER_PREFIX}{diagnosis}" and len(message) == FAILURE_LIMIT


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

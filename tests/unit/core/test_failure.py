"""core/failure.py: a Failure rendered cause first, the launcher's own finding before it; within SageMaker's 1024
characters, the cause and the newest detail kept; the user's own failure text kept in front of the launcher's
diagnosis."""

from sagemaker_mxnet_horovod.core.failure import (
    FAILURE_LIMIT,
    LAUNCHER_HEAD_ROOM,
    LAUNCHER_PREFIX,
    USER_TEXT_CUT,
    Failure,
    compose_failure,
    fit,
)


def test_a_failure_renders_its_cause_then_whose_last_lines_follow():
    failure = Failure("rank 1 on algo-2 exited with code 1: ValueError: bad batch", rank=1, host="algo-2",
                      tail_title="rank 1 stderr", tail=("Traceback (most recent call last):", "  ", "ValueError: bad batch"))
    assert failure.render() == DIAGNOSIS
    assert Failure("mnist on algo-1 exited with code 2").render() == "mnist on algo-1 exited with code 2"


def test_the_launchers_own_finding_goes_first_and_only_when_there_is_one():
    failure = Failure("rank 0 on algo-1 exited with code 1: x", tail_title="rank 0 stderr", tail=("x",))
    assert failure.with_finding(None) == failure
    found = failure.with_finding("worker algo-2 went away during the job (container stopped or crashed)")
    assert found.render().splitlines() == ["worker algo-2 went away during the job (container stopped or crashed)",
                                           "rank 0 on algo-1 exited with code 1: x",
                                           "--- last lines of rank 0 stderr ---", "x"]


def test_fit_keeps_cause_and_newest_detail():
    message = "rank 0 on algo-1 exited with code 1: boom\n" + "\n".join(f"line {i}" for i in range(500))
    text = fit(message)
    assert len(text) <= FAILURE_LIMIT
    assert text.startswith("rank 0 on algo-1 exited with code 1: boom\n...\n")
    assert text.endswith("line 499")
    assert fit("x" * 5000).endswith("...") and len(fit("x" * 5000)) == FAILURE_LIMIT



# --- the user's own failure text ---------------------------------------------------------------------------

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

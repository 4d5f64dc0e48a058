"""scripts/test_lanes.py, make test's runner: its lanes run at the same time, a failure of any lane or of a command
after them fails the run, the commands after them start once every lane has ended, and each lane's pytest summary
(durations, failures, counts) and make's errors are shown at the end; a lane past the deadline is ended. Runs it on
small shell commands and a real pytest run; no Docker."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test_lanes.py"

# Each lane waits for the other's file, with a deadline: run one after the other, the first would give up.
MEET = "touch {me}.here; for _ in $(seq 200); do [ -e {other}.here ] && break; sleep 0.05; done; [ -e {other}.here ]"


def run_lanes(tmp_path, *args, timeout=120):
    return subprocess.run([sys.executable, str(SCRIPT), "--log-dir", str(tmp_path / "logs"), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_the_lanes_run_at_once_and_each_is_logged_and_shown_with_its_name(tmp_path):
    done = run_lanes(tmp_path, "--lane", "image=" + MEET.format(me="image", other="host") + " && echo image met host",
                     "--lane", "host=" + MEET.format(me="host", other="image") + " && echo host met image")
    assert done.returncode == 0, done.stdout
    assert "[image] image met host" in done.stdout.splitlines() and "[host] host met image" in done.stdout.splitlines()
    assert (tmp_path / "logs" / "image.log").read_text() == "image met host\n"
    assert (tmp_path / "logs" / "host.log").read_text() == "host met image\n"
    assert done.stdout.splitlines()[-1].startswith("lanes: image passed (0 min "), done.stdout


@pytest.mark.parametrize("failing", ["image", "host"])
def test_a_failing_lane_fails_the_run_and_the_rest_still_runs_after_both_lanes(tmp_path, failing):
    lanes = {name: MEET.format(me=name, other=other) + f"; touch {name}.ended" + ("; exit 3" if name == failing else "")
             for name, other in (("image", "host"), ("host", "image"))}
    done = run_lanes(tmp_path, "--lane", f"image={lanes['image']}", "--lane", f"host={lanes['host']}",
                     "--then", "alone=[ -e image.ended ] && [ -e host.ended ] && echo after both")
    assert done.returncode == 1, done.stdout
    assert re.search(rf"^\[{failing}\] ended at \S+ after 0 min \d s: FAILED \(exit 3\)$", done.stdout, re.MULTILINE)
    assert "[alone] after both" in done.stdout.splitlines()
    last = done.stdout.splitlines()[-1]
    assert f"{failing} FAILED" in last and "alone passed" in last, last


def test_a_failing_command_after_the_lanes_fails_the_run(tmp_path):
    done = run_lanes(tmp_path, "--lane", "image=true", "--lane", "host=true", "--then", "alone=exit 1")
    assert done.returncode == 1, done.stdout
    assert "image passed" in done.stdout.splitlines()[-1] and "alone FAILED" in done.stdout.splitlines()[-1]


PYTEST_MODULE = textwrap.dedent("""\
    def test_passes():
        print("a line of the test's own")


    def test_fails():
        assert 1 == 2, "one is not two"
""")


def test_each_lanes_pytest_summary_and_makes_errors_are_shown_at_the_end(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_some.py").write_text(PYTEST_MODULE)
    pytest_run = f"{sys.executable} -m pytest -p no:cacheprovider --durations=5 --durations-min=0 test_some.py"
    done = run_lanes(tmp_path, "--lane", f"host={pytest_run} || echo 'make: *** [Makefile:9: host-tests] Error 1'",
                     "--lane", "image=true")
    assert done.returncode == 0, done.stdout  # the lane's own exit status: echo's
    end = done.stdout[done.stdout.index("===== host: passed in "):].splitlines()
    shown = [line.removeprefix("[host] ") for line in end[1:end.index(next(x for x in end if x.startswith("===== image")))]]
    assert shown[0].startswith("=") and "slowest 5 durations" in shown[0], shown
    assert any(line.endswith("test_some.py::test_fails") for line in shown[1:]), shown
    assert "FAILED test_some.py::test_fails - AssertionError: one is not two" in shown
    assert [line for line in shown if "1 failed, 1 passed in " in line] != []
    assert shown[-1] == "make: *** [Makefile:9: host-tests] Error 1"
    assert not [line for line in shown if "a line of the test's own" in line or "def test_fails" in line], shown


def test_every_lanes_failed_tests_and_make_errors_are_named_again_just_before_the_last_line(tmp_path):
    """A CI log shows only its end: the failed tests and make's errors of every lane and of the commands after them,
    a line each."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_some.py").write_text(PYTEST_MODULE)
    pytest_run = f"{sys.executable} -m pytest -p no:cacheprovider test_some.py"
    make_error = "make[1]: *** [Makefile:153: structure-test-gpu] Error 1"
    done = run_lanes(tmp_path, "--lane", f"image={pytest_run}", "--lane", f"host=echo '{make_error}'; false",
                     "--then", f"alone={pytest_run} -k fails")
    assert done.returncode == 1, done.stdout
    failed = "FAILED test_some.py::test_fails - AssertionError: one is not two"
    assert done.stdout.splitlines()[-4:-1] == [f"[image] {failed}", f"[host] {make_error}", f"[alone] {failed}"]


def test_an_unfinished_line_is_shown_so_far_and_carried_on(tmp_path):
    done = run_lanes(tmp_path, "--unfinished-line-s", "0.3", "--lane", "image=printf 'tests/a.py ..'; sleep 3; echo '.F'",
                     "--lane", "host=true")
    assert done.returncode == 0, done.stdout
    assert ["[image] tests/a.py ..", "[image] ... .F"] == [x for x in done.stdout.splitlines() if "." in x and "[image] " in x
                                                           and "started" not in x and "ended" not in x]
    assert (tmp_path / "logs" / "image.log").read_text() == "tests/a.py ...F\n"


def test_a_lane_past_the_deadline_is_ended_and_named(tmp_path):
    done = run_lanes(tmp_path, "--deadline-h", str(1 / 3600), "--lane", "image=sleep 100", "--lane", "host=true",
                     "--then", "alone=echo never", timeout=60)
    assert done.returncode == 1, done.stdout
    assert "[image] still running at the deadline (--deadline-h): ending it" in done.stdout
    assert "[alone] not started: past the deadline (--deadline-h)" in done.stdout
    assert "never" not in done.stdout.replace("alone=echo never", "")


def test_make_test_runs_the_lanes_then_the_alone_tests():
    # Under -n make still runs a recipe line that calls $(MAKE): PYTHON=echo turns the runner into an echo.
    # Without the calling make's settings: this runs inside make test's host lane, whose make passes its flags and
    # its command line's variables (TEST_MARK, GPU_STEPS, ...) to whatever it runs, in the environment too.
    env = {key: value for key, value in os.environ.items()
           if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GPU_STEPS", "TEST_MARK", "TEST_LOG_DIR", "TEST_DEADLINE_H")}
    dry = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), "test", "VENV=.venv-x", "PYTHON=echo"],
                         capture_output=True, text=True, timeout=120, check=False, env=env)
    assert dry.returncode == 0, dry.stderr
    printed = " ".join(dry.stdout.replace("\\\n", " ").split())
    pre_steps, runner = printed.split("echo scripts/test_lanes.py ")[:2]
    assert "--lane \"image=make --no-print-directory -k image-tests sdk-tests TEST_MARK='not alone'\"" in runner, runner
    assert ("--lane \"host=make --no-print-directory -k structure-test build-gpu structure-test-gpu size sbom "
            "host-tests TEST_MARK='not alone'\"") in runner, runner
    assert "--then \"alone=make --no-print-directory -k image-tests sdk-tests host-tests TEST_MARK=alone\"" in runner
    # Before the lanes: lint and the CPU image, which both lanes need.
    assert "ruff check" in pre_steps and "--target image --build-arg FLAVOR=cpu" in pre_steps, pre_steps
    assert "container-structure-test" not in pre_steps and "FLAVOR=gpu" not in pre_steps

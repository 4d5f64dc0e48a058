"""requirements.py's parts that need no pip: the install's environment (a pip.conf of the code directory, the plan's
pip settings, the job's own variables winning), the held packages read from the build's file and written where pip
reads them after the user's own constraints, what is asked before the install and how each place is named, pip's
error line, and the environment the toolkit's pip runs in, put back after. The install itself (pip, the toolkit):
tests/image/test_requirements_install.py and the fault suite's requirements rows (tests/faults)."""

import io
import os
from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.act.requirements import (
    PipInstall,
    PipLocations,
    Tee,
    environment,
    held_packages,
    pip_environment,
    pip_error,
    probes,
    source,
    with_constraints,
)
from sagemaker_mxnet_horovod.compat.codeartifact import codeartifact_repository
from sagemaker_mxnet_horovod.parse.held_packages import hold

HELD = hold({"numpy": "1.23.5", "mxnet": "1.9.1"}, frozenset())
CA = codeartifact_repository("arn:aws:codeartifact:us-west-2:111122223333:repository/my-domain/my-repo")


def logged():
    lines = []
    return lines, lines.append


@pytest.fixture
def job_env(monkeypatch):
    for name in [name for name in os.environ if name.startswith("PIP_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_a_pip_conf_in_the_code_directory_is_pips_configuration(tmp_path, job_env):
    (tmp_path / "pip.conf").write_text("[global]\nindex-url = https://index.example/simple\n")
    lines, log = logged()
    env = pip_environment({"PIP_CACHE_DIR": "/wp/pip", "OMP_NUM_THREADS": "2"}, tmp_path, log)
    assert env["PIP_CONFIG_FILE"] == str(tmp_path / "pip.conf")
    assert env["PIP_CACHE_DIR"] == "/wp/pip" and "OMP_NUM_THREADS" not in env  # the plan's pip settings only
    assert env["PIP_DISABLE_PIP_VERSION_CHECK"] == "1"
    assert lines == [f"pip's configuration: {tmp_path / 'pip.conf'} (PIP_CONFIG_FILE)"]


def test_the_jobs_own_pip_config_file_and_variables_win(tmp_path, job_env):
    (tmp_path / "pip.conf").write_text("")
    job_env.setenv("PIP_CONFIG_FILE", "/etc/mine.conf")
    job_env.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "0")
    lines, log = logged()
    env = pip_environment({}, tmp_path, log)
    assert env["PIP_CONFIG_FILE"] == "/etc/mine.conf" and env["PIP_DISABLE_PIP_VERSION_CHECK"] == "0"
    assert lines == [f"{tmp_path / 'pip.conf'} not used: the job's PIP_CONFIG_FILE=/etc/mine.conf is pip's "
                     f"configuration"]


def test_without_a_pip_conf_nothing_is_configured(tmp_path, job_env):
    lines, log = logged()
    assert "PIP_CONFIG_FILE" not in pip_environment({}, tmp_path, log) and lines == []


def test_the_held_packages_come_from_the_builds_file_and_a_missing_one_holds_nothing(tmp_path):
    build = tmp_path / "constraints.txt"
    build.write_text("# the image's\nnumpy==1.23.5\nmxnet==1.9.1\n")
    lines, log = logged()
    assert held_packages(build, frozenset({"nunpy"}), log).versions == {"numpy": "1.23.5", "mxnet": "1.9.1"}
    assert lines == ["WARNING: sagemaker_requirements_replace names nunpy, which the image does not have"]
    lines, log = logged()
    assert not held_packages(tmp_path / "none.txt", frozenset(), log)
    assert lines == [f"WARNING: {tmp_path / 'none.txt'} is missing: requirements.txt installs without the image's "
                     f"packages held"]


def test_the_held_packages_are_written_for_pip_after_the_users_own_constraints(tmp_path):
    setup = PipInstall(tmp_path, False, {"PIP_CONSTRAINT": "ignored.txt"}, HELD)
    lines, log = logged()
    held = with_constraints(setup, PipLocations(constraints=("/code/c.txt", "/etc/more.txt")), tmp_path / "run", log)
    written = tmp_path / "run" / "requirements-constraints.txt"
    assert held.env["PIP_CONSTRAINT"] == f"/code/c.txt /etc/more.txt {written}"
    assert "mxnet==1.9.1\nnumpy==1.23.5\n" in written.read_text()
    assert lines == [f"holding the image's 2 packages while requirements.txt installs ({written}; "
                     f"sagemaker_requirements_replace releases them)"]
    # pip could not tell: the job's PIP_CONSTRAINT is kept
    assert with_constraints(setup, None, tmp_path / "run", log).env["PIP_CONSTRAINT"] == f"ignored.txt {written}"


def test_nothing_held_leaves_pip_as_it_was(tmp_path):
    setup = PipInstall(tmp_path, False, {"PIP_CONSTRAINT": "mine.txt"})
    assert with_constraints(setup, PipLocations(), tmp_path / "run", print) is setup
    assert not (tmp_path / "run").exists()


def test_remote_indexes_are_asked_for_their_pip_page_find_links_as_they_are_and_codeartifacts_api_too(tmp_path):
    locations = PipLocations(index_urls=("https://u:p@index.example/simple", "file:///opt/index"),
                             find_links=("https://wheels.example/all.html", "/opt/ml/code/wheels"))
    setup = PipInstall(tmp_path, False, {}, codeartifact=CA)
    assert probes(setup, locations) == {
        "https://index.example/simple/pip/": "https://u:p@index.example/simple",
        "https://wheels.example/all.html": "https://wheels.example/all.html",
        CA.api_url: CA.api_url}
    no_index = PipLocations(index_urls=("https://index.example/simple",), no_index=True)
    assert probes(PipInstall(tmp_path, False, {}), no_index) == {}
    assert probes(PipInstall(tmp_path, False, {}), None) == {}


def test_each_place_is_named_where_the_user_configured_it(tmp_path):
    env = {"PIP_INDEX_URL": "https://a.example/simple", "PIP_EXTRA_INDEX_URL": "https://b.example/simple "
           "https://c.example/simple", "PIP_CONFIG_FILE": "/opt/ml/code/pip.conf"}
    setup = PipInstall(tmp_path, False, env, codeartifact=CA)
    assert source("https://a.example/simple", setup) == "PIP_INDEX_URL"
    assert source("https://c.example/simple", setup) == "PIP_EXTRA_INDEX_URL"
    assert source(CA.index_url, setup) == "CA_REPOSITORY_ARN's CodeArtifact repository"
    assert source(CA.api_url, setup) == "the CodeArtifact API, for CA_REPOSITORY_ARN's token"
    assert source("https://pypi.org/simple", setup) == "pip's default index"
    assert source("https://d.example/simple", setup) == "/opt/ml/code/pip.conf or requirements.txt"
    assert source("https://d.example/simple", PipInstall(tmp_path, False, {})) == (
        "pip's configuration or requirements.txt")


def test_pip_install_runs_as_the_toolkits_for_a_script_and_a_package(tmp_path):
    assert PipInstall(tmp_path, True, {}).args == ["."]
    (tmp_path / "requirements.txt").write_text("")
    assert PipInstall(tmp_path, False, {}).args == ["-r", "requirements.txt"]
    assert PipInstall(tmp_path, True, {}).args == [".", "-r", "requirements.txt"]


def test_pips_first_error_line_says_what_went_wrong():
    output = (Path(__file__).parents[1] / "diagnose" / "captures" / "pip-no-such-package.txt").read_text()
    assert pip_error(output, "") == "Could not find a version that satisfies the requirement no-such-package " \
                                    "(from versions: none)"
    assert pip_error("Looking in indexes: x\n", RuntimeError("exit 1")) == "exit 1"


def test_what_the_toolkit_prints_goes_through_and_is_kept():
    out = io.StringIO()
    kept = Tee(out, limit=10)
    print("ERROR: first", file=kept)
    print("second", file=kept)
    assert out.getvalue() == "ERROR: first\nsecond\n" and kept.text == "st\nsecond\n"


def test_the_toolkits_pip_gets_the_environment_and_this_process_gets_its_own_back(job_env):
    job_env.setenv("KEEP_ME", "1")
    with environment({"PIP_CONSTRAINT": "/run/c.txt"}):
        assert os.environ.get("PIP_CONSTRAINT") == "/run/c.txt" and "KEEP_ME" not in os.environ
    assert "PIP_CONSTRAINT" not in os.environ and os.environ["KEEP_ME"] == "1"

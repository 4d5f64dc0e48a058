"""pip_locations.py with the image's pip (26): where `pip install` will look, as pip's own code reads its
configuration and the requirements file's options, each source and pip's order among them (a requirements file's
-i over the command line's, the command line's over PIP_INDEX_URL, PIP_INDEX_URL over a pip.conf), and the
constraint files pip has already. Runs inside the image (make image-tests)."""

import os

import pytest
from sagemaker_mxnet_horovod.act.pip_locations import pip_locations


@pytest.fixture
def code(tmp_path, monkeypatch):
    """An empty code directory as the working directory, and no PIP_* of the test run's own."""
    for name in [name for name in os.environ if name.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "no-pip.conf"))  # none of the image's (it has none)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def requirements(code, text):
    (code / "requirements.txt").write_text(text)
    return ["-r", "requirements.txt"]


def test_by_default_pypi(code):
    assert pip_locations(requirements(code, "numpy\n")) == {
        "index_urls": ["https://pypi.org/simple"], "find_links": [], "no_index": False, "constraints": []}


def test_the_jobs_variables(code, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://a.example/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://b.example/simple https://c.example/simple")
    for name in ("one.txt", "two.txt"):
        (code / name).write_text("")
    monkeypatch.setenv("PIP_CONSTRAINT", f"{code / 'one.txt'} two.txt")
    found = pip_locations(requirements(code, "numpy\n"))
    assert found["index_urls"] == ["https://a.example/simple", "https://b.example/simple", "https://c.example/simple"]
    assert found["constraints"] == [str(code / "one.txt"), "two.txt"]


def test_a_pip_conf_and_the_variable_over_it(code, monkeypatch):
    (code / "pip.conf").write_text("[global]\nindex-url = https://conf.example/simple\n"
                                   "[install]\nfind-links = https://conf.example/wheels.html\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(code / "pip.conf"))
    found = pip_locations(requirements(code, "numpy\n"))
    assert found["index_urls"] == ["https://conf.example/simple"]
    assert found["find_links"] == ["https://conf.example/wheels.html"]
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.example/simple")
    assert pip_locations(requirements(code, "numpy\n"))["index_urls"] == ["https://env.example/simple"]


def test_the_requirements_files_options_win_with_its_variables_expanded(code, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.example/simple")
    monkeypatch.setenv("TOKEN", "s3cret")
    (code / "wheels").mkdir()
    args = requirements(code, "--index-url https://file.example/simple\n"
                              "--extra-index-url https://aws:${TOKEN}@extra.example/simple\n-f wheels\nnumpy\n")
    found = pip_locations([*args, "-i", "https://codeartifact.example/simple/"])
    assert found["index_urls"] == ["https://file.example/simple", "https://aws:s3cret@extra.example/simple"]
    assert found["find_links"] == [str(code / "wheels")]


def test_codeartifacts_index_on_the_command_line_wins_over_the_variable(code, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.example/simple")
    found = pip_locations([*requirements(code, "numpy\n"), "-i", "https://codeartifact.example/simple/"])
    assert found["index_urls"] == ["https://codeartifact.example/simple/"]


def test_no_index(code):
    found = pip_locations(requirements(code, "--no-index\n--find-links /opt/ml/code\nwarmdemo==0.1\n"))
    assert found["no_index"] is True and found["find_links"] == ["/opt/ml/code"]


def test_a_python_package_is_read_without_building_it(code):
    (code / "setup.py").write_text("raise SystemExit('built')\n")
    assert pip_locations(["."])["index_urls"] == ["https://pypi.org/simple"]


def test_a_plain_http_index_is_one_pip_asks_only_if_it_is_trusted_or_this_machine(code, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "http://plain.example/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "http://127.0.0.1:8080/simple https://secure.example/simple")
    args = requirements(code, "numpy\n")
    assert pip_locations(args)["index_urls"] == ["http://127.0.0.1:8080/simple", "https://secure.example/simple"]
    monkeypatch.setenv("PIP_TRUSTED_HOST", "plain.example")
    assert pip_locations(args)["index_urls"][0] == "http://plain.example/simple"

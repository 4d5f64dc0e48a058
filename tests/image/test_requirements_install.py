"""requirements.py inside the image: the toolkit's install with the image's held packages (its real
/etc/sagemaker-mxnet-horovod/constraints.txt) and pip, from a test index of fake wheels (scripts/wheel_index.py), for
what the fault suite's cross-container rows do not run: a conflict through a dependency, a kept-out build, a Python
package's own requirement, an index that cannot be reached while the requirements need nothing from it (installed
offline), a failure that is no conflict, and nothing of the image's changed by any of them. Runs inside the image
(make image-tests)."""

import os
from importlib.metadata import version

import pytest
from sagemaker_mxnet_horovod.act.requirements import install_requirements
from sagemaker_mxnet_horovod.core.exits import ConfigError, SetupError
from sagemaker_mxnet_horovod.core.plan import Program
from wheel_index import FakePackage, write_index

FAKES = [FakePackage("numpy", "9.0"), FakePackage("needs-new-numpy", "1.0", ("numpy>=1.24",)),
         FakePackage("opencv-contrib-python", "4.12.0.88"),
         FakePackage("needs-contrib", "1.0", ("opencv-contrib-python",))]
SETUP_PY = "from setuptools import setup\nsetup(name='userpkg', version='1.0', install_requires=['numpy>=1.24'])\n"


@pytest.fixture
def job(tmp_path, monkeypatch):
    """A code directory, the test index as PIP_INDEX_URL, and what the install logged."""
    for name in [name for name in os.environ if name.startswith("PIP_") or name == "CA_REPOSITORY_ARN"]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_INDEX_URL", write_index(tmp_path / "index", FAKES).as_uri())
    code = tmp_path / "code"
    code.mkdir()
    lines = []

    def install(requirements: str | None = None, kind: str = "script"):
        if requirements is not None:
            (code / "requirements.txt").write_text(requirements)
        program = Program("train.py", ("python", "train.py"), builtin=False, code_dir=str(code), kind=kind)
        install_requirements(program, {}, str(tmp_path / "run"), lines.append)

    install.lines, install.code = lines, code
    yield install
    assert version("numpy") == "1.23.5" and version("mxnet") == "1.9.1", "the image's packages changed"


def test_a_conflict_through_a_dependency_names_who_depends_on_what(job):
    with pytest.raises(ConfigError, match=r"^requirements\.txt needs numpy>=1\.24 \(needs-new-numpy 1\.0 depends on "
                                          r"it\), but the image holds numpy 1\.23\.5\. Nothing was installed"):
        job("needs-new-numpy\n")


def test_another_build_of_an_image_module_is_kept_out(job):
    with pytest.raises(ConfigError, match=r"^requirements\.txt needs opencv-contrib-python \(needs-contrib 1\.0 "
                                          r"depends on it\), another build of the image's cv2 module \(opencv-python "
                                          r"4\.11\.0\.86\+headless, opencv-python-headless 4\.11\.0\.86\)"):
        job("needs-contrib\n")


def test_a_python_packages_own_requirement_is_held_too(job, monkeypatch):
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")  # setuptools from the image, not the test index
    (job.code / "setup.py").write_text(SETUP_PY)
    with pytest.raises(ConfigError, match=r"^the Python package needs numpy>=1\.24 \(userpkg 1\.0 depends on it\), "
                                          r"but the image holds numpy 1\.23\.5"):
        job(kind="package")


def test_requirements_met_by_the_image_install_without_an_index_that_cannot_be_reached(job, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # the discard port: nobody listens there
    job("numpy\npandas>=2\n")
    assert job.lines[-2] == ("WARNING: cannot reach http://127.0.0.1:9/simple (PIP_INDEX_URL): Connection refused; "
                             "requirements.txt needs nothing from it: installing with PIP_NO_INDEX=1")


def test_requirements_that_need_an_index_that_cannot_be_reached_name_it(job, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    with pytest.raises(SetupError, match=r"^cannot reach the package index http://127\.0\.0\.1:9/simple "
                                         r"\(PIP_INDEX_URL\): Connection refused, and requirements\.txt needs it: Could "
                                         r"not find a version that satisfies the requirement needs-new-numpy"):
        job("needs-new-numpy\n")


def test_a_failure_that_is_no_conflict_says_pips_error(job):
    with pytest.raises(SetupError, match=r"^pip could not install requirements\.txt: Could not find a version that "
                                         r"satisfies the requirement no-such-package \(from versions: none\)$"):
        job("no-such-package\n")


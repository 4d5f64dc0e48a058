"""pip_conflicts.py: pip's ResolutionImpossible reports, as the image's pip 26 wrote them through the toolkit's
install_requirements with the image's packages held (captures/pip-*.txt, from a test index of fake wheels: a
"numpy" 9.0, "needs-new-numpy" that depends on numpy>=1.24, "needs-contrib" that depends on opencv-contrib-python),
read into the conflicts with what the image holds, and the failure that names them."""

from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.core.failure import FAILURE_LIMIT
from sagemaker_mxnet_horovod.diagnose.pip_conflicts import Conflict, conflict_message, read_conflicts
from sagemaker_mxnet_horovod.parse.held_packages import hold

CAPTURES = Path(__file__).parent / "captures"
HELD = hold({"numpy": "1.23.5", "mxnet": "1.9.1", "opencv-python-headless": "4.11.0.86"}, frozenset())


def capture(name: str) -> str:
    return (CAPTURES / f"pip-{name}.txt").read_text()


@pytest.mark.parametrize("name, conflicts", [
    ("conflict-direct", [Conflict("numpy", "numpy>=1.24")]),
    ("conflict-transitive", [Conflict("numpy", "numpy>=1.24", "needs-new-numpy 1.0")]),
    ("conflict-kept-out", [Conflict("opencv-contrib-python", "opencv-contrib-python", "needs-contrib 1.0")]),
    ("conflict-users-own", []),  # the user's own constraint smmh-harmless<2: not the image's
])
def test_the_conflicts_with_what_the_image_holds_are_read_from_pips_report(name, conflicts):
    assert read_conflicts(capture(name), HELD) == conflicts


def test_a_direct_conflict_names_the_package_the_requirement_and_the_images_version():
    message = conflict_message(read_conflicts(capture("conflict-direct"), HELD), HELD)
    assert message.startswith("requirements.txt asks for numpy>=1.24, but the image holds numpy 1.23.5. Nothing "
                              "was installed")
    assert message.endswith("set the hyperparameter sagemaker_requirements_replace=numpy to replace it anyway")
    assert len("invalid job configuration: " + message) < FAILURE_LIMIT


def test_a_transitive_conflict_names_who_depends_on_it():
    message = conflict_message(read_conflicts(capture("conflict-transitive"), HELD), HELD)
    assert message.startswith("requirements.txt needs numpy>=1.24 (needs-new-numpy 1.0 depends on it), but the image "
                              "holds numpy 1.23.5.")


def test_a_kept_out_build_names_the_module_and_the_images_build_of_it():
    message = conflict_message(read_conflicts(capture("conflict-kept-out"), HELD), HELD, "the Python package")
    assert message.startswith("the Python package needs opencv-contrib-python (needs-contrib 1.0 depends on it), "
                              "another build of the image's cv2 module (opencv-python-headless 4.11.0.86).")
    assert "sagemaker_requirements_replace=opencv-contrib-python to replace it" in message


def test_many_conflicts_are_counted_beyond_the_first_three_and_all_are_named_to_replace():
    conflicts = [Conflict("numpy", f"numpy>={n}", f"pkg{n} 1.0") for n in range(2, 7)] + [
        Conflict("mxnet", "mxnet>=2")]
    message = conflict_message(conflicts, HELD)
    assert message.count("depends on it") == 3 and "(and 3 more: see the log)" in message
    assert "sagemaker_requirements_replace=numpy,mxnet to replace them anyway" in message

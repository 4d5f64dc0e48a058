"""Tests mirror the code (docs/testing.md): every module of the image's Python packages (container/src) has a
test module named for it, test_<module>.py or test_<module>_<topic>.py for a topic of a large one, and every
module of tests/unit is named for the module it tests. Static: reads file names only."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Tested inside the image, where their libraries are (MXNet, pycocotools): the test module that covers each.
TESTED_IN_IMAGE = {
    "datatool": "tests/entrypoints/test_datatool.py",
    "synthetic_coco": "tests/rcnn/test_rcnn_unit.py",  # with the R-CNN programs' data
}


def source_modules() -> set:
    return {path.stem for path in (ROOT / "container" / "src").glob("*/*.py") if path.stem != "__init__"}


def unit_test_modules() -> set:
    return {path.stem for path in (ROOT / "tests" / "unit").glob("test_*.py")}


def covers(test: str, module: str) -> bool:
    """Whether the test module's name says it tests `module`."""
    return test == f"test_{module}" or test.startswith(f"test_{module}_")


def test_every_module_has_a_test_module_named_for_it():
    untested = sorted(module for module in source_modules() - set(TESTED_IN_IMAGE)
                      if not any(covers(test, module) for test in unit_test_modules()))
    assert untested == [], "add tests/unit/test_<module>.py for each"


def test_the_modules_tested_in_the_image_are_still_there_and_so_are_their_tests():
    assert set(TESTED_IN_IMAGE) <= source_modules()
    assert [test for test in TESTED_IN_IMAGE.values() if not (ROOT / test).is_file()] == []


def test_every_unit_test_module_is_named_for_the_module_it_tests():
    strays = sorted(test for test in unit_test_modules()
                    if not any(covers(test, module) for module in source_modules()))
    assert strays == [], "name each test_<module>.py or test_<module>_<topic>.py"

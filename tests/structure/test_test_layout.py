"""Tests mirror the code (docs/testing.md): every module of the image's Python packages (container/src) has a
test module named for it, test_<module>.py or test_<module>_<topic>.py for a topic of a large one, and every
module of tests/unit is named for the module it tests; no two modules on pytest's import path share a name.
Static: reads file names only."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Tested inside the image, where their libraries are (MXNet, pycocotools): the test module that covers each.
TESTED_IN_IMAGE = {
    "datatool": "tests/programs/test_datatool.py",
    "mnist_files": "tests/programs/test_datatool.py",  # the one MNIST reader, of synth-data and the program
    "synthetic_coco": "tests/programs/rcnn/test_synthetic_coco.py",  # with the R-CNN programs' data
    "coco_categories": "tests/programs/rcnn/test_synthetic_coco.py",  # a data table
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


def import_root(test_dir: Path) -> Path:
    """Where pytest imports a test directory's modules from: the directory itself, or, inside a package
    (tests/programs), the first directory above it without an __init__.py (its modules are then programs.*)."""
    while (test_dir / "__init__.py").is_file():
        test_dir = test_dir.parent
    return test_dir


def import_roots() -> list:
    """The directories on sys.path under pytest: pytest.ini's pythonpath, tests/ and each test directory's
    import root (pytest puts it there itself)."""
    test_dirs = {import_root(path.parent) for pattern in ("test_*.py", "conftest.py")
                 for path in (ROOT / "tests").rglob(pattern)}
    return [ROOT / "container" / "src", ROOT / "entrypoints", ROOT / "scripts", *sorted(test_dirs)]


def test_no_two_importable_modules_share_a_name():
    # Two of one name would shadow each other, depending on which directory pytest inserted last.
    places: dict = {}
    for root in import_roots():
        for path in root.iterdir():
            if (path.suffix == ".py" and path.stem not in ("conftest", "__init__")
                    or path.is_dir() and (path / "__init__.py").is_file()):
                places.setdefault(path.stem, []).append(str(path.relative_to(ROOT)))
    assert {name: where for name, where in places.items() if len(where) > 1} == {}

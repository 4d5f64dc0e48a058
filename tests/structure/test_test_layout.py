"""Tests mirror the code (docs/testing.md): every module of the image's Python packages (container/src) has a
test module named for it in the mirrored folder of tests/unit: test_<module>.py, or test_<module>_<topic>.py for a
topic of a large one. The launcher's folders (parse/, plan/, act/, ...) are tests/unit's; the image's two other
packages have a folder each (MIRRORS). Every module of tests/unit is named for a module of its folder, and no two
modules on pytest's import path share a name. Static: reads file names only."""

from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "container" / "src"
UNIT = ROOT / "tests" / "unit"
# Where each package's modules have their unit tests: the package's own folders below that one.
MIRRORS = {
    "sagemaker_mxnet_horovod": "",
    "sagemaker_mxnet_container": "mxnet_container",
    "sagemaker_mxnet_data": "mxnet_data",
    "sagemaker_mxnet_debugger": "mxnet_debugger",
    "sagemaker_mxnet_compression": "mxnet_compression",
    "sagemaker_mxnet_import_hooks": "mxnet_import_hooks",
    "sagemaker_mxnet_straggler": "mxnet_straggler",
}
# Tested inside the image, where their libraries are (numpy, MXNet, pycocotools): the test module that covers each.
TESTED_IN_IMAGE = {
    "sagemaker_mxnet_data/synth_data.py": "tests/programs/test_synth_data.py",
    # the one MNIST reader, of synth-data and the program
    "sagemaker_mxnet_data/mnist_files.py": "tests/programs/test_synth_data.py",
    "sagemaker_mxnet_data/synthetic_coco.py": "tests/programs/rcnn/test_synthetic_coco.py",
    "sagemaker_mxnet_data/coco_categories.py": "tests/programs/rcnn/test_synthetic_coco.py",  # a data table
    # wraps Gluon's Block.__call__: tested with MXNet and smdebug
    "sagemaker_mxnet_debugger/zero_code_change.py": "tests/image/test_zero_code_change.py",
    # wraps Horovod's DistributedTrainer: tested with Horovod
    "sagemaker_mxnet_compression/hook.py": "tests/image/test_gradient_compression.py",
    # pip's own reading of its configuration: tested with the image's pip
    "sagemaker_mxnet_horovod/act/pip_locations.py": "tests/image/test_pip_locations.py",
    # wraps Horovod's DistributedTrainer and times it: tested with Horovod, several ranks under mpirun
    "sagemaker_mxnet_straggler/hook.py": "tests/image/test_straggler.py",
    "sagemaker_mxnet_straggler/recorder.py": "tests/image/test_straggler.py",
    "sagemaker_mxnet_straggler/chart.py": "tests/image/test_straggler.py",  # matplotlib
}


def source_modules() -> dict:
    """Each module, by its path under container/src, -> the folder of tests/unit that mirrors its folder."""
    modules = {}
    for path in SRC.rglob("*.py"):
        relative = PurePosixPath(path.relative_to(SRC).as_posix())
        if relative.name == "__init__.py":
            continue
        package, *folders = relative.parent.parts
        modules[str(relative)] = PurePosixPath(MIRRORS[package], *folders)
    return modules


def unit_test_modules() -> dict:
    """Each test module of tests/unit, by name -> its folder relative to tests/unit."""
    return {path.stem: PurePosixPath(path.parent.relative_to(UNIT).as_posix()) for path in UNIT.rglob("test_*.py")}


def covers(test: str, module: str) -> bool:
    """Whether the test module's name says it tests `module`."""
    return test == f"test_{module}" or test.startswith(f"test_{module}_")


def test_every_module_has_a_test_module_named_for_it_in_the_mirrored_folder():
    tests = unit_test_modules()
    untested = sorted(module for module, folder in source_modules().items() if module not in TESTED_IN_IMAGE
                      and not any(covers(test, PurePosixPath(module).stem) and where == folder
                                  for test, where in tests.items()))
    assert untested == [], "add tests/unit/<its folder>/test_<module>.py for each"


def test_the_modules_tested_in_the_image_are_still_there_and_so_are_their_tests():
    assert set(TESTED_IN_IMAGE) <= set(source_modules())
    assert [test for test in TESTED_IN_IMAGE.values() if not (ROOT / test).is_file()] == []


def test_every_unit_test_module_is_named_for_a_module_of_its_folder():
    modules = source_modules()
    strays = sorted(f"{folder}/{test}" for test, folder in unit_test_modules().items()
                    if not any(covers(test, PurePosixPath(module).stem) and where == folder
                               for module, where in modules.items()))
    assert strays == [], "name each test_<module>.py or test_<module>_<topic>.py, in its module's mirrored folder"


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
    return [SRC, ROOT / "entrypoints", ROOT / "scripts", *sorted(test_dirs)]


def test_no_two_importable_modules_share_a_name():
    # Two of one name would shadow each other, depending on which directory pytest inserted last.
    places: dict = {}
    for root in import_roots():
        for path in root.iterdir():
            if (path.suffix == ".py" and path.stem not in ("conftest", "__init__")
                    or path.is_dir() and (path / "__init__.py").is_file()):
                places.setdefault(path.stem, []).append(str(path.relative_to(ROOT)))
    assert {name: where for name, where in places.items() if len(where) > 1} == {}

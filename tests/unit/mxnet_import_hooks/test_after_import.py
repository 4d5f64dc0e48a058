"""after_import.py: a change made to a module right after its first import, by a real import of a real module (the
.pth hooks' Horovod and Gluon wraps: tests/image), or at once when the module is already imported."""

import importlib
import sys

import pytest
from sagemaker_mxnet_import_hooks.after_import import AfterImport, after_import


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    (tmp_path / "after_import_target.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "after_import_target", raising=False)
    yield tmp_path
    for name in [name for name in sys.modules if name.split(".")[0] in ("after_import_target", "after_import_pkg")]:
        del sys.modules[name]
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, AfterImport)]


def test_the_change_comes_after_the_modules_own_code_and_the_finder_then_leaves(module_dir):
    seen = []
    after_import("after_import_target", lambda module: seen.append(module.VALUE) or setattr(module, "VALUE", 2))
    assert seen == [] and "after_import_target" not in sys.modules  # nothing imported until a program does
    other = next(finder for finder in sys.meta_path if isinstance(finder, AfterImport))
    assert other.find_spec("json_not_this", None) is None  # other imports pass through untouched
    import after_import_target

    assert seen == [1] and after_import_target.VALUE == 2
    assert not any(isinstance(finder, AfterImport) for finder in sys.meta_path)


def test_two_changes_to_one_module_both_happen_in_the_order_they_were_asked_for(module_dir):
    # Gradient compression and the straggler recorder both change horovod.mxnet.
    seen = []
    after_import("after_import_target", lambda module: seen.append(("first", module.VALUE)))
    after_import("after_import_target", lambda module: seen.append(("second", module.VALUE)))
    import after_import_target  # noqa: F401

    assert seen == [("first", 1), ("second", 1)]
    assert not any(isinstance(finder, AfterImport) for finder in sys.meta_path)


def test_the_same_change_asked_for_twice_is_made_once(module_dir):
    # Debian's Python runs a venv's .pth files twice: each hook's install() asks twice, from the same code.
    seen = []

    def install():
        after_import("after_import_target", lambda module: seen.append(module.VALUE))

    install()
    install()
    import after_import_target  # noqa: F401

    assert seen == [1]


def test_an_imported_module_is_changed_at_once(module_dir):
    import after_import_target

    after_import("after_import_target", lambda module: setattr(module, "VALUE", 3))
    assert after_import_target.VALUE == 3
    assert not any(isinstance(finder, AfterImport) for finder in sys.meta_path)


def write_package(module_dir, init_code):
    """after_import_pkg, its submodule gluon, and gluon's submodule block (as mxnet.gluon.block, the Debugger's); and
    another block, after_import_pkg.block."""
    (module_dir / "after_import_pkg" / "gluon").mkdir(parents=True)
    (module_dir / "after_import_pkg" / "__init__.py").write_text(init_code)
    (module_dir / "after_import_pkg" / "gluon" / "__init__.py").write_text("")
    (module_dir / "after_import_pkg" / "gluon" / "block.py").write_text("VALUE = 1\n")
    (module_dir / "after_import_pkg" / "block.py").write_text("")


def test_a_dotted_name_is_changed_at_its_own_import_not_its_parents(module_dir):
    write_package(module_dir, "")
    seen = []
    after_import("after_import_pkg.gluon.block", lambda module: seen.append(module.__name__))
    importlib.import_module("after_import_pkg.block")  # another block
    importlib.import_module("after_import_pkg.gluon")  # block's parent

    assert seen == [] and any(isinstance(finder, AfterImport) for finder in sys.meta_path)
    from after_import_pkg.gluon import block

    assert seen == ["after_import_pkg.gluon.block"] and block.VALUE == 1
    assert sys.modules["after_import_pkg.gluon.block"] is block
    assert not any(isinstance(finder, AfterImport) for finder in sys.meta_path)


def test_a_dotted_name_imported_by_its_parents_init_is_changed(module_dir):
    write_package(module_dir, "from .gluon import block\n")  # mxnet's __init__ imports gluon, gluon block
    after_import("after_import_pkg.gluon.block", lambda module: setattr(module, "VALUE", 2))
    import after_import_pkg

    assert after_import_pkg.gluon.block.VALUE == 2
    assert not any(isinstance(finder, AfterImport) for finder in sys.meta_path)

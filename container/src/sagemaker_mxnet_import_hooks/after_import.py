"""Change a module once it is imported, without importing it: for the image's .pth hooks (gradient compression,
zero-code-change Debugger), which run at every interpreter start and must cost nothing until a program imports
what they change. Standard library only."""

from __future__ import annotations

import sys
from collections.abc import Callable


def after_import(name: str, action: Callable[[object], object]) -> None:
    """action(module) now if `name` is imported, else right after its first import runs. The same change asked for
    again before then (the same code: Debian's Python runs a venv's .pth files twice) is made once."""
    if name in sys.modules:
        action(sys.modules[name])
    elif not any(isinstance(finder, AfterImport) and finder.name == name and
                 getattr(finder.action, "__code__", None) is getattr(action, "__code__", action)
                 for finder in sys.meta_path):
        sys.meta_path.insert(0, AfterImport(name, action))


class AfterImport:
    """A meta path finder: finds `name` as the finders after it would, and calls action(module) once the module has
    run; then it leaves sys.meta_path. Several for one module (two hooks change horovod.mxnet) each act, in the order
    they were made."""

    def __init__(self, name: str, action: Callable[[object], object]):
        self.name, self.action = name, action

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = next((found for finder in list(sys.meta_path) if hasattr(finder, "find_spec")
                     and (found := finder.find_spec(name, path, target)) is not None), None)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_act(module):
            exec_module(module)
            self.action(module)

        spec.loader.exec_module = exec_then_act
        return spec

#!/usr/bin/env python3
"""The launcher's package diagram, drawn from its imports: which folder of container/src/sagemaker_mxnet_horovod
imports which, as a mermaid flowchart, written into docs/launcher.md between its markers.

  python3 scripts/package_diagram.py          # rewrite the diagram in docs/launcher.md
  python3 scripts/package_diagram.py --check  # exit 1 when the committed diagram is not the code's

Stdlib only, static (reads the source, imports nothing of it). tests/structure/test_package_imports.py checks the
same graph: that every import points down the layers (LAYERS) and that no backend imports another, and that the
committed diagram is this script's.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "container" / "src"
PACKAGE = "sagemaker_mxnet_horovod"
DOC = ROOT / "docs" / "launcher.md"
BEGIN = "<!-- package diagram: written by scripts/package_diagram.py from the imports; do not edit by hand -->"
END = "<!-- end of package diagram -->"
# The layers, lowest first: a module imports only from its own layer and the ones before it. The package's own
# __init__.py (its version) counts as core.
LAYERS = ("core", "parse", "compat", "diagnose", "plan", "act", "backends", "cli")


def module_name(path: Path, src: Path = SRC) -> str:
    """'sagemaker_mxnet_horovod.act.cluster.master' for its file ('...act.cluster' for its __init__.py)."""
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, src: Path = SRC) -> bool:
    path = src.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def absolute_module(node: ast.ImportFrom, importer_package: str) -> str | None:
    """The module a `from ... import` names, a relative one (`from ..act import x`, `from . import y`) resolved
    against the package of the importing module; None when it climbs above the top package."""
    if not node.level:
        return node.module
    parts = importer_package.split(".")
    if node.level - 1 >= len(parts):
        return None
    base = parts[:len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(tree: ast.Module, src: Path = SRC, package: str = PACKAGE, importer_package: str = "") -> set[str]:
    """The package's modules one module's code imports, wherever the import statement is (a function's too), relative
    imports resolved against `importer_package` (the package the importing module is in; itself for an
    __init__.py)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == package}
        elif isinstance(node, ast.ImportFrom):
            module = absolute_module(node, importer_package)
            if not module or module.split(".")[0] != package:
                continue
            names = {f"{module}.{alias.name}" for alias in node.names}
            found |= {name for name in names if is_module(name, src)} or {module}
            if any(not is_module(name, src) for name in names):
                found.add(module)
    return found


def module_imports(src: Path = SRC, package: str = PACKAGE) -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports."""
    return {module_name(path, src): imported_modules(ast.parse(path.read_text()), src, package,
                                                     module_name(path.parent / "__init__.py", src))
            for path in sorted((src / package).rglob("*.py"))}


def folder(module: str, src: Path = SRC) -> str:
    """The folder a module is in, as the diagram names it: 'act', 'act/cluster', 'backends' (the registry),
    'backends/mpi' (a package is in its own folder); the package's own __init__.py (its version) is core's, cli.py
    is 'cli'."""
    parts = module.split(".")
    where = parts[1:] if src.joinpath(*parts, "__init__.py").is_file() else parts[1:-1]
    if where:
        return "/".join(where)
    return "core" if len(parts) == 1 else parts[1]


def layer(module: str, src: Path = SRC) -> str:
    return folder(module, src).split("/")[0]


def upward_imports(imports: dict[str, set[str]], src: Path = SRC) -> list[str]:
    """'importer -> imported' for each import that points up the layers, or into a folder of no layer."""
    rank = {name: index for index, name in enumerate(LAYERS)}
    return sorted(f"{module} -> {target}" for module, targets in imports.items() for target in targets
                  if rank.get(layer(target, src), len(LAYERS)) > rank.get(layer(module, src), -1))


def cross_backend_imports(imports: dict[str, set[str]], src: Path = SRC) -> list[str]:
    """'importer -> imported' for each import from one backend's folder into another's: a backend is a unit."""
    def backend(module: str) -> str | None:
        where = folder(module, src)
        return where if where.startswith("backends/") else None

    return sorted(f"{module} -> {target}" for module, targets in imports.items() for target in targets
                  if backend(module) and backend(target) and backend(module) != backend(target))


def folder_graph(imports: dict[str, set[str]], src: Path = SRC) -> dict[str, set[str]]:
    """Folder -> the other folders its modules import."""
    graph: dict[str, set[str]] = {}
    for module, targets in imports.items():
        graph.setdefault(folder(module, src), set()).update(folder(target, src) for target in targets)
    return {name: targets - {name} for name, targets in graph.items()}


def mermaid(graph: dict[str, set[str]]) -> str:
    """The graph as a mermaid flowchart, top-down, each layer a row from cli down to core; folders of one layer
    side by side."""
    ids = {name: name.replace("/", "_") for name in graph}
    ordered = sorted(graph, key=lambda name: (-LAYERS.index(name.split("/")[0]), name))
    lines = ["flowchart TD"]
    lines += [f'    {ids[name]}["{name}/"]' if name != "cli" else f'    {ids[name]}["cli.py"]' for name in ordered]
    lines += [f"    {ids[name]} --> {ids[target]}" for name in ordered for target in sorted(graph[name], key=ordered.index)]
    return "\n".join(lines)


def diagram_block(src: Path = SRC) -> str:
    return f"{BEGIN}\n```mermaid\n{mermaid(folder_graph(module_imports(src), src))}\n```\n{END}"


def with_diagram(doc: str, block: str) -> str:
    """The document with its diagram (between BEGIN and END) replaced by `block`."""
    start, end = doc.index(BEGIN), doc.index(END) + len(END)
    return doc[:start] + block + doc[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/launcher.md's diagram is stale")
    args = parser.parse_args(argv)
    doc = DOC.read_text()
    updated = with_diagram(doc, diagram_block())
    if args.check:
        if updated != doc:
            print(f"{DOC.relative_to(ROOT)}: the package diagram is not the code's; run scripts/package_diagram.py",
                  file=sys.stderr)
            return 1
        return 0
    if updated != doc:
        DOC.write_text(updated)
        print(f"wrote the package diagram into {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

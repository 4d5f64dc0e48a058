"""The image's Python code keeps the shape docs/launcher.md describes: every module opens with what it is for, no
module over 400 lines, no function of the launcher over 60 (a longer one wants named steps). The host side's Python
(tests/, scripts/, benchmarks/) keeps the 400-line rule too. Static: parses the source."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "container" / "src"
HOST_SIDE = ("tests", "scripts", "benchmarks")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def modules():
    return sorted(SRC.rglob("*.py"))


def test_every_module_and_package_opens_with_its_purpose():
    assert [str(p.relative_to(SRC)) for p in modules() if not ast.get_docstring(ast.parse(p.read_text()))] == []


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(SRC)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_module_of_the_tests_scripts_or_benchmarks_is_over_400_lines():
    # A longer test module wants topics (test_<module>_<topic>.py), a longer script or benchmark a package.
    paths = sorted(path for folder in HOST_SIDE for path in (ROOT / folder).rglob("*.py"))
    long = {str(p.relative_to(ROOT)): n for p in paths if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_of_the_launcher_is_over_60_lines():
    long = {}
    for path in (SRC / "sagemaker_mxnet_horovod").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(SRC)}:{node.name}"] = length
    assert long == {}


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


# The settings table declares each key; a module the table imports names its own key itself; the progress watch
# runs inside every rank and imports nothing of the launcher's (stdlib only, its docstring says).
KEYS_RETYPED_IN = {"sagemaker_mxnet_horovod/parse/settings.py", "sagemaker_mxnet_horovod/parse/resource_config.py",
                   "sagemaker_mxnet_horovod/diagnose/progress.py"}


def test_the_launcher_names_a_settings_key_through_the_settings_table():
    """A message naming a hyperparameter of the launcher's writes KEYS.<field> (parse/settings.py), not the key
    retyped: a renamed knob then renames every message, and a typo fails at once. Docstrings and comments may name
    keys."""
    import re
    import sys

    sys.path.insert(0, str(SRC))
    from sagemaker_mxnet_horovod.parse.settings import KNOBS

    keys = sorted((given.key for _, given in KNOBS), key=len, reverse=True)
    pattern = re.compile(r"(?<![\w/{.])(" + "|".join(map(re.escape, keys)) + r")(?![\w.}])")
    retyped = []
    for path in sorted((SRC / "sagemaker_mxnet_horovod").rglob("*.py")):
        name = str(path.relative_to(SRC))
        if name in KEYS_RETYPED_IN:
            continue
        tree = ast.parse(path.read_text())
        skip = docstrings(tree)
        retyped += [f"{name}:{node.lineno}: {found.group(1)}" for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                    and (found := pattern.search(node.value))]
    assert retyped == []

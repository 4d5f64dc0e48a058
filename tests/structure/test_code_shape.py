"""The image's Python code keeps the shape docs/launcher.md describes: every module opens with what it is for, no
module over 400 lines, no function of the launcher over 60 (a longer one wants named steps). Static: parses the
source."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "container" / "src"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def modules():
    return sorted(SRC.rglob("*.py"))


def test_every_module_and_package_opens_with_its_purpose():
    assert [str(p.relative_to(SRC)) for p in modules() if not ast.get_docstring(ast.parse(p.read_text()))] == []


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(SRC)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
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

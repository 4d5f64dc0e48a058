"""The launcher's imports point down its layers (core < parse < compat < diagnose < plan < act < backends < cli: a
module imports only from its own layer and the ones before it), no backend imports another (each is one folder,
chosen in backends/registry.py), and docs/launcher.md's package diagram is the one scripts/package_diagram.py draws
from the code. Static: parses the source. The checks themselves are shown to catch what they look for on a small
package written here."""

from pathlib import Path

import package_diagram
from package_diagram import LAYERS, cross_backend_imports, module_imports, upward_imports


def test_every_folder_of_the_launcher_has_its_layer():
    folders = {package_diagram.layer(module) for module in module_imports()}
    assert folders - set(LAYERS) == set(), "place each new folder in package_diagram.LAYERS"


def test_every_import_points_down_the_layers():
    assert upward_imports(module_imports()) == []


def test_no_backend_imports_another():
    assert cross_backend_imports(module_imports()) == []


def test_the_package_diagram_in_the_docs_is_the_codes():
    doc = package_diagram.DOC.read_text()
    assert package_diagram.with_diagram(doc, package_diagram.diagram_block()) == doc, (
        "run python3 scripts/package_diagram.py and commit docs/launcher.md")


def write_package(src: Path, modules: dict) -> None:
    for name, code in modules.items():
        path = src / "sagemaker_mxnet_horovod" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)


def test_the_checks_catch_an_upward_import_and_one_backend_importing_another(tmp_path):
    write_package(tmp_path, {
        "__init__.py": "", "core/__init__.py": "", "core/log.py": "",
        "parse/__init__.py": "", "parse/values.py": "from sagemaker_mxnet_horovod.act import stacks\n",
        "act/__init__.py": "", "act/stacks.py": "from sagemaker_mxnet_horovod.core.log import log\n",
        "backends/__init__.py": "", "backends/mpi/__init__.py": "", "backends/gloo/__init__.py": "",
        "backends/gloo/run.py": "def run():\n    from sagemaker_mxnet_horovod.backends.mpi import worker_run\n",
        "backends/mpi/worker_run.py": "", "backends/registry.py": "from sagemaker_mxnet_horovod.backends import gloo\n",
    })
    imports = module_imports(tmp_path)
    assert upward_imports(imports, tmp_path) == [
        "sagemaker_mxnet_horovod.parse.values -> sagemaker_mxnet_horovod.act.stacks"]
    assert cross_backend_imports(imports, tmp_path) == [
        "sagemaker_mxnet_horovod.backends.gloo.run -> sagemaker_mxnet_horovod.backends.mpi.worker_run"]


def test_the_checks_resolve_relative_imports(tmp_path):
    write_package(tmp_path, {
        "__init__.py": "", "core/__init__.py": "", "core/log.py": "",
        "parse/__init__.py": "from . import values\n",
        "parse/values.py": "from ..act import stacks\nfrom .. import core\n",
        "act/__init__.py": "from .stacks import run\n", "act/stacks.py": "from ..core.log import log\n",
        "backends/__init__.py": "", "backends/mpi/__init__.py": "", "backends/gloo/__init__.py": "",
        "backends/gloo/run.py": "def run():\n    from ..mpi import worker_run\n    from . import tune\n",
        "backends/gloo/tune.py": "", "backends/mpi/worker_run.py": "",
    })
    imports = module_imports(tmp_path)
    assert imports["sagemaker_mxnet_horovod.parse"] == {"sagemaker_mxnet_horovod.parse.values"}
    assert imports["sagemaker_mxnet_horovod.parse.values"] == {"sagemaker_mxnet_horovod.act.stacks",
                                                              "sagemaker_mxnet_horovod.core"}
    assert imports["sagemaker_mxnet_horovod.act"] == {"sagemaker_mxnet_horovod.act.stacks"}
    assert imports["sagemaker_mxnet_horovod.act.stacks"] == {"sagemaker_mxnet_horovod.core.log"}
    assert imports["sagemaker_mxnet_horovod.backends.gloo.run"] == {
        "sagemaker_mxnet_horovod.backends.mpi.worker_run", "sagemaker_mxnet_horovod.backends.gloo.tune"}
    assert upward_imports(imports, tmp_path) == [
        "sagemaker_mxnet_horovod.parse.values -> sagemaker_mxnet_horovod.act.stacks"]
    assert cross_backend_imports(imports, tmp_path) == [
        "sagemaker_mxnet_horovod.backends.gloo.run -> sagemaker_mxnet_horovod.backends.mpi.worker_run"]

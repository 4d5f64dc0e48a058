"""A package index of tiny pure-Python wheels, written on the spot: PEP 503's simple layout in a directory, which pip
reads as an index through a file:// URL (PIP_INDEX_URL=file:///DIR, or index-url in a pip.conf). The tests' stand-in
for PyPI: no network, and packages that say what they are (a "numpy" 9.0 that is nothing but its version).

  PYTHONPATH=scripts python3 -m wheel_index DIR numpy==9.0 smmh-harmless==1.0 'needs-new-numpy==1.0; numpy>=1.24'

Stdlib only (the tests run it on the host and in the image).
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FakePackage:
    name: str
    version: str
    requires: tuple[str, ...] = ()  # Requires-Dist lines: "numpy>=1.24"


def normalized(name: str) -> str:
    """PEP 503's project name: the index's directory."""
    return re.sub(r"[-_.]+", "-", name).lower()


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write_wheel(directory: Path, package: FakePackage) -> Path:
    """The wheel: one module named for the package, holding its version, and the metadata pip reads."""
    dist = re.sub(r"[-_.]+", "_", package.name)
    info = f"{dist}-{package.version}.dist-info"
    files = {
        f"{dist}/__init__.py": f'__version__ = "{package.version}"\n',
        f"{info}/METADATA": "Metadata-Version: 2.1\n"
                            f"Name: {package.name}\nVersion: {package.version}\n"
                            + "".join(f"Requires-Dist: {requirement}\n" for requirement in package.requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: wheel_index\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    path = directory / f"{dist}-{package.version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        record = []
        for name, text in files.items():
            wheel.writestr(name, text.encode())
            record.append(record_line(name, text.encode()))
        wheel.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


def links_page(names: list[str]) -> str:
    links = "".join(f'<a href="{html.escape(name)}">{html.escape(name)}</a>\n' for name in names)
    return f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n"


def write_index(root: Path, packages: list[FakePackage]) -> Path:
    """root/<project>/<wheel> with each project's page, and the root page: the index pip reads at file://root."""
    projects: dict[str, list[str]] = {}
    for package in packages:
        project = root / normalized(package.name)
        project.mkdir(parents=True, exist_ok=True)
        projects.setdefault(normalized(package.name), []).append(write_wheel(project, package).name)
    for project, wheels in projects.items():
        (root / project / "index.html").write_text(links_page(sorted(wheels)))
    (root / "index.html").write_text(links_page([f"{project}/" for project in sorted(projects)]))
    return root


def parse_package(text: str) -> FakePackage:
    """'name==version' with '; requirement' parts: 'needs-new-numpy==1.0; numpy>=1.24'."""
    head, *requires = (part.strip() for part in text.split(";"))
    name, _, version = head.partition("==")
    return FakePackage(name.strip(), version.strip(), tuple(requires))


if __name__ == "__main__":
    write_index(Path(sys.argv[1]), [parse_package(arg) for arg in sys.argv[2:]])

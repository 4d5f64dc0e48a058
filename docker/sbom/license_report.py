"""License report of an image from its CycloneDX SBOM: every Debian and Python package with its version and
license, what is not permissive or is unknown first.

Runs in the final build stage (bind-mounted, stdlib only) right after syft wrote the SBOM, so the report
describes the same content; `--root` is the scanned filesystem, used to say why a Debian package's license is
unknown. Also importable for the tests (tests/structure/test_supply_chain.py).

    python license_report.py SBOM.cdx.json [--root /] [--flavor cpu] > licenses.md
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

# Classes, most in need of review first. Only "permissive" stays out of the report's review section.
UNKNOWN, PROPRIETARY, COPYLEFT, WEAK_COPYLEFT, OTHER, PERMISSIVE = (
    "unknown", "proprietary", "copyleft", "weak copyleft", "other (review)", "permissive")
CLASS_ORDER = (UNKNOWN, PROPRIETARY, COPYLEFT, WEAK_COPYLEFT, OTHER, PERMISSIVE)

# Matched in this order against a lower-cased license name or SPDX id: the first hit decides.
_RULES = (
    (r"nvidia|proprietary|commercial|eula", PROPRIETARY),
    (r"lgpl|lesser general public|library general public", WEAK_COPYLEFT),
    (r"agpl|affero|gpl|general public licen[cs]e", COPYLEFT),
    (r"mpl|mozilla|epl|eclipse public|cddl|artistic", WEAK_COPYLEFT),
    (r"\bmit\b|expat|bsd|apache|\bisc\b|psf|python software foundation|python-2\.0|zlib|unlicense|"
     r"public[ -]domain|cc0|\bx11\b|hpnd|\bbsl\b|boost|\bzpl\b|zope public|0bsd|\bcurl\b|ofl|openssl|"
     r"permissive|historical|tcl|\bwtfpl\b|unicode|ssleay|\bpil\b|libpng|\bijg\b|bzip2|fsfap|fsful|fsf-free|"
     r"beerware|openssh|^ssh$|tcp-wrappers", PERMISSIVE),
)
# Some Python packages put their whole license text in the License field: recognise the common ones by a
# phrase, otherwise classify by the text's first line only (a text may mention any license in passing).
_TEXT_PHRASES = (
    ("license agreement for matplotlib", "Matplotlib license (PSF-style)", PERMISSIVE),
    ("redistribution and use in source and binary forms", "BSD-style", PERMISSIVE),
    ("permission is hereby granted, free of charge", "MIT-style", PERMISSIVE),
)
LONG_LICENSE_NAME = 80

# What NVIDIA's CUDA, cuDNN and NCCL wheels are licensed under (their metadata says only "NVIDIA Proprietary
# Software" or carries the whole agreement): (wheel name prefix, license, where it is, class). All three allow
# redistributing the runtime libraries with an application, which is what this image does.
NVIDIA_LICENSES = (
    ("nvidia-cudnn", "NVIDIA cuDNN Software License Agreement (runtime redistributable)",
     "https://docs.nvidia.com/deeplearning/cudnn/latest/reference/eula.html", PROPRIETARY),
    ("nvidia-nccl", "NCCL license (BSD-3-Clause style)",
     "https://github.com/NVIDIA/nccl/blob/master/LICENSE.txt", PERMISSIVE),
    ("nvidia-", "NVIDIA CUDA Toolkit EULA (Attachment A: redistributable)",
     "https://docs.nvidia.com/cuda/eula/", PROPRIETARY),
)


@dataclass(frozen=True)
class Entry:
    kind: str  # "deb" or "python"
    name: str
    version: str
    licenses: tuple[str, ...]
    license_class: str
    note: str = ""


def is_license_text(name: str) -> bool:
    return "\n" in name or len(name) > LONG_LICENSE_NAME


def summarize(name: str) -> str:
    """A license name fit for one table cell: a full license text becomes its kind or its first line."""
    if not is_license_text(name):
        return name
    lowered = " ".join(name.lower().split())
    kind = next((kind for phrase, kind, _ in _TEXT_PHRASES if phrase in lowered), None)
    first_line = next(line.strip(" =#*") for line in name.splitlines() if line.strip(" =#*"))
    return f"{kind or first_line[:LONG_LICENSE_NAME]} (license text)"


def classify_one(name: str) -> str:
    if name.strip().lower() in ("", "unknown", "none", "noassertion"):
        return UNKNOWN
    if is_license_text(name):
        lowered = " ".join(name.lower().split())
        for phrase, _, license_class in _TEXT_PHRASES:
            if phrase in lowered:
                return license_class
        name = next(line for line in name.splitlines() if line.strip())
    lowered = name.lower()
    for pattern, license_class in _RULES:
        if re.search(pattern, lowered):
            return license_class
    return OTHER


def classify(licenses: tuple[str, ...]) -> str:
    """The class of a package: the one most in need of review among its licenses (a Debian package lists
    every license of its files; a Python package's alternatives are rare enough to review by hand)."""
    if not licenses:
        return UNKNOWN
    return min((classify_one(name) for name in licenses), key=CLASS_ORDER.index)


def component_licenses(component: dict) -> tuple[str, ...]:
    names = []
    for item in component.get("licenses") or ():
        if "expression" in item:
            names.append(item["expression"])
        else:
            lic = item.get("license", {})
            names.append(lic.get("id") or lic.get("name") or "")
    return tuple(sorted({n.strip() for n in names if n and n.strip()}))


def nvidia_license(name: str) -> tuple[str, str, str] | None:
    """(license, where it is, class) of an NVIDIA wheel, by name."""
    return next((rest for prefix, *rest in NVIDIA_LICENSES if name.startswith(prefix)), None)


def classifier_licenses(root: Path, name: str, version: str) -> tuple[str, ...]:
    """The `License ::` trove classifiers of an installed Python distribution's metadata under `root`: what a
    wheel that declares no License field (pyinstrument 5) says of its license."""
    stem = re.sub(r"[-_.]+", "_", name).lower()
    for metadata in root.glob("opt/venv/lib/python*/site-packages/*.dist-info/METADATA"):
        dist = metadata.parent.name.removesuffix(".dist-info")
        if dist.lower() == f"{stem}-{version}".lower():
            lines = metadata.read_text(errors="replace").splitlines()
            return tuple(sorted({f"{line.split('::')[-1].strip()} (trove classifier)" for line in lines
                                 if line.startswith("Classifier: License ::")}))
    return ()


def entries(sbom: dict, root: Path | None = None) -> list[Entry]:
    """Debian and Python packages of a CycloneDX SBOM (deduplicated by kind, name, version)."""
    seen: dict[tuple[str, str, str], Entry] = {}
    for component in sbom.get("components", ()):
        purl = unquote(component.get("purl", ""))
        kind = "deb" if purl.startswith("pkg:deb/") else "python" if purl.startswith("pkg:pypi/") else None
        if kind is None:
            continue
        name, version = component["name"], component.get("version", "")
        licenses = component_licenses(component)
        license_class, note = classify(licenses), ""
        if kind == "python" and (named := nvidia_license(name)):
            license_name, where, license_class = named
            licenses, note = (license_name,), f"NVIDIA: {where}"
        if not licenses and kind == "python" and root is not None:
            licenses = classifier_licenses(root, name, version)
            license_class = classify(licenses)
        if not licenses and kind == "deb" and root is not None:
            copyright_file = root / "usr/share/doc" / name / "copyright"
            note = (f"no machine-readable license in /usr/share/doc/{name}/copyright" if copyright_file.exists()
                    else f"no /usr/share/doc/{name}/copyright in the image")
        key = (kind, name, version)
        if key in seen and seen[key].licenses:
            continue
        seen[key] = Entry(kind, name, version, licenses, license_class, note)
    return sorted(seen.values(), key=lambda e: (CLASS_ORDER.index(e.license_class), e.kind, e.name, e.version))


def _row(entry: Entry) -> str:
    licenses = "; ".join(summarize(name) for name in entry.licenses) or "?"
    cells = (entry.kind, entry.name, entry.version, licenses.replace("|", "/"), entry.license_class, entry.note)
    return "| " + " | ".join(cells) + " |"


def render(all_entries: list[Entry], flavor: str) -> str:
    review = [e for e in all_entries if e.license_class != PERMISSIVE]
    counts = {c: sum(e.license_class == c for e in all_entries) for c in CLASS_ORDER}
    header = "| type | package | version | license | class | note |\n| --- | --- | --- | --- | --- | --- |"
    lines = [
        f"# License report: sagemaker-mxnet-horovod {flavor}",
        "",
        f"{len(all_entries)} packages ({sum(e.kind == 'deb' for e in all_entries)} Debian, "
        f"{sum(e.kind == 'python' for e in all_entries)} Python), from the image's SBOM. "
        + ", ".join(f"{c}: {n}" for c, n in counts.items() if n) + ".",
        "",
        "License names are what each package declares (Debian: its machine-readable copyright file; Python: its "
        "metadata); the class is a pattern match on them, to sort what needs a human look first.",
        "",
        f"## Not permissive, or unknown ({len(review)})",
        "",
        header,
        *map(_row, review),
        "",
        f"## All packages ({len(all_entries)})",
        "",
        header,
        *map(_row, sorted(all_entries, key=lambda e: (e.kind, e.name, e.version))),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sbom", type=Path, help="CycloneDX JSON")
    parser.add_argument("--root", type=Path, help="the scanned filesystem (explains unknown Debian licenses)")
    parser.add_argument("--flavor", default="", help="named in the title")
    args = parser.parse_args(argv)
    sbom = json.loads(args.sbom.read_text())
    sys.stdout.write(render(entries(sbom, args.root), args.flavor))
    return 0


if __name__ == "__main__":
    sys.exit(main())

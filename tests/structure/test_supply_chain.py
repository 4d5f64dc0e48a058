"""The supply-chain helpers' pure parts: the license report (docker/sbom/license_report.py, run in the build) and
the vulnerability gate (scripts/audit.py, `make audit`). No Docker, no network."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load(path: str):
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


report = load("docker/sbom/license_report.py")
audit = load("scripts/audit.py")


def component(name, version, purl_type, *licenses, key="name"):
    purl = f"pkg:{purl_type}/{'debian/' if purl_type == 'deb' else ''}{name}@{version}"
    return {"name": name, "version": version, "purl": purl,
            "licenses": [{"license": {key: lic}} for lic in licenses] or None}


SBOM = {"components": [
    component("libc6", "2.36-9", "deb", "GPL-2.0-only", "LGPL-2.1-only", key="id"),
    component("bash", "5.2", "deb"),
    component("libffi8", "3.4.4", "deb", "Expat", "GPL-2.0-or-later"),
    component("libzstd1", "1.5.4", "deb", "BSD-3-Clause", key="id"),
    component("numpy", "1.23.5", "pypi", "BSD"),
    component("paramiko", "5.1.0", "pypi", "LGPL-2.1-only"),
    component("scipy", "1.15.3", "pypi", "Copyright (c) 2001 Enthought\n\nRedistribution and use in source and "
                                         "binary forms, with or without modification, are permitted provided ..."),
    component("yacs", "0.1.8", "pypi", "UNKNOWN"),
    component("nvidia-cudnn-cu11", "8.5.0.96", "pypi", "NVIDIA Proprietary Software"),
    component("nvidia-nccl-cu11", "2.21.5", "pypi", "NVIDIA Proprietary Software"),
    component("nvidia-cublas-cu11", "11.10.3.66", "pypi", "NVIDIA Proprietary Software"),
    component("wheel", "0.46.3", "pypi", "MIT"),
    component("wheel", "0.48.0", "pypi", "MIT"),
    {"name": "python", "version": "3.11", "purl": "pkg:generic/python@3.11"},
]}


@pytest.mark.parametrize("name, expected", [
    ("MIT", report.PERMISSIVE), ("Apache 2.0", report.PERMISSIVE), ("BSD-3-Clause", report.PERMISSIVE),
    ("ZPL-2.1", report.PERMISSIVE), ("public-domain", report.PERMISSIVE), ("PSF-2.0", report.PERMISSIVE),
    ("GPL-2.0-only", report.COPYLEFT), ("AGPL-3.0", report.COPYLEFT), ("LGPL-2.1-or-later", report.WEAK_COPYLEFT),
    ("MPL-2.0", report.WEAK_COPYLEFT), ("NVIDIA Proprietary Software", report.PROPRIETARY),
    ("UNKNOWN", report.UNKNOWN), ("Dual License", report.OTHER),
    # A license text: by its wording, never by a license it mentions in passing.
    ("BSD 3-Clause License\n\nNeither the name ... nor GPL ...", report.PERMISSIVE),
    ("x\nPermission is hereby granted, free of charge, to any person" + " " * 80, report.PERMISSIVE),
])
def test_classify_one(name, expected):
    assert report.classify_one(name) == expected


def test_a_package_is_classed_by_its_least_permissive_license():
    assert report.classify(("Expat", "GPL-2.0-or-later")) == report.COPYLEFT
    assert report.classify(()) == report.UNKNOWN


def test_entries_name_nvidia_licenses_and_explain_unknown_debian_ones(tmp_path):
    (tmp_path / "usr/share/doc/bash").mkdir(parents=True)
    (tmp_path / "usr/share/doc/bash/copyright").write_text("not machine-readable")
    by_name = {(e.name, e.version): e for e in report.entries(SBOM, tmp_path)}
    assert ("python", "3.11") not in by_name  # only Debian and Python packages
    assert by_name[("wheel", "0.46.3")] and by_name[("wheel", "0.48.0")]
    cudnn, nccl, cublas = (by_name[(n, v)] for n, v in [("nvidia-cudnn-cu11", "8.5.0.96"),
                                                          ("nvidia-nccl-cu11", "2.21.5"),
                                                          ("nvidia-cublas-cu11", "11.10.3.66")])
    assert cudnn.licenses == ("NVIDIA cuDNN Software License Agreement (runtime redistributable)",)
    assert nccl.licenses == ("NCCL license (BSD-3-Clause style)",) and nccl.license_class == report.PERMISSIVE
    assert cublas.licenses == ("NVIDIA CUDA Toolkit EULA (Attachment A: redistributable)",)
    assert cublas.license_class == cudnn.license_class == report.PROPRIETARY
    assert cublas.note == "NVIDIA: https://docs.nvidia.com/cuda/eula/"
    assert all(not report.is_license_text(e.licenses[0]) for e in (cudnn, nccl, cublas))  # shown in full
    assert by_name[("bash", "5.2")].note == "no machine-readable license in /usr/share/doc/bash/copyright"
    assert by_name[("scipy", "1.15.3")].license_class == report.PERMISSIVE


def test_report_lists_what_needs_review_first():
    text = report.render(report.entries(SBOM), "cpu")
    review, everything = text.split("## All packages")
    review_rows = [line for line in review.splitlines() if line.startswith("| deb") or line.startswith("| python")]
    names = [row.split(" | ")[1] for row in review_rows]
    assert names[:2] == ["bash", "yacs"]  # unknown first
    assert set(names) == {"bash", "yacs", "nvidia-cublas-cu11", "nvidia-cudnn-cu11", "libc6", "libffi8", "paramiko"}
    assert "numpy" not in review and "| python | numpy | 1.23.5 | BSD | permissive |" in everything
    assert "| python | scipy | 1.15.3 | BSD-style (license text) | permissive |" in everything
    assert all("\n" not in row for row in review_rows)


def test_report_cli_reads_a_cyclonedx_file(tmp_path):
    sbom = tmp_path / "sbom.cdx.json"
    sbom.write_text(json.dumps(SBOM))
    done = subprocess.run([sys.executable, str(ROOT / "docker/sbom/license_report.py"), str(sbom), "--flavor", "gpu"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.startswith("# License report: sagemaker-mxnet-horovod gpu\n")


# --- audit -------------------------------------------------------------------------------------------------

def finding(package="pillow", vuln_id="GHSA-aaaa", fix=("12.0",), severity="HIGH", aliases=("CVE-1",)):
    return audit.Finding(package, "1.0", vuln_id, aliases, fix, severity)


def test_python_packages_skip_what_is_not_on_pypi():
    sbom = {"components": SBOM["components"] + [component("sagemaker-mxnet-horovod", "0.1.0", "pypi"),
                                               component("opencv-python", "4.11.0.86+headless", "pypi")]}
    packages = audit.python_packages(sbom)
    assert ("numpy", "1.23.5") in packages and ("libc6", "2.36-9") not in packages
    assert not {name for name, _ in packages} & set(audit.NOT_ON_PYPI)


def test_requirement_files_never_name_a_package_twice():
    files = audit.requirement_files({("wheel", "0.46.3"), ("wheel", "0.48.0"), ("numpy", "1.23.5")})
    assert files == [["numpy==1.23.5", "wheel==0.46.3"], ["wheel==0.48.0"]]


def test_gate_fails_only_on_fixable_high_or_critical_or_unknown_not_allowlisted():
    allow = audit.AllowEntry("CVE-9", "numpy", "fixed in numpy 1.24, which MXNet cannot use")
    stale = audit.AllowEntry("GHSA-old", "pillow", "was fixed")
    findings = [
        finding(vuln_id="GHSA-high"),
        finding(vuln_id="GHSA-crit", severity="CRITICAL"),
        finding(vuln_id="GHSA-unknown", severity="UNKNOWN"),
        finding(vuln_id="GHSA-medium", severity="MEDIUM"),
        finding(package="mxnet", vuln_id="GHSA-nofix", fix=()),
        finding(package="numpy", vuln_id="GHSA-allowed", aliases=("CVE-9",)),
        # An allowlist entry excuses its own package only.
        finding(package="pillow", vuln_id="GHSA-other", aliases=("CVE-9",)),
    ]
    failing, allowed, reported, unused = audit.gate(findings, [allow, stale])
    assert [f.vuln_id for f in failing] == ["GHSA-high", "GHSA-crit", "GHSA-unknown", "GHSA-other"]
    assert [(f.vuln_id, e) for f, e in allowed] == [("GHSA-allowed", allow)]
    assert [f.vuln_id for f in reported] == ["GHSA-medium", "GHSA-nofix"]
    assert unused == [stale]


def test_severity_of_reads_githubs_rating():
    assert audit.severity_of({"database_specific": {"severity": "MODERATE"}}) == "MEDIUM"
    assert audit.severity_of({"database_specific": {"severity": "critical"}}) == "CRITICAL"
    assert audit.severity_of({"severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N"}]}) is None


def test_allowlist_entries_must_say_why(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text('[[ignore]]\nid = "GHSA-x"\npackage = "numpy"\nreason = "pinned for MXNet"\n')
    assert audit.load_allowlist(good) == [audit.AllowEntry("GHSA-x", "numpy", "pinned for MXNet")]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[ignore]]\nid = "GHSA-x"\npackage = "numpy"\nreason = " "\n')
    with pytest.raises(audit.AllowlistError, match="lacks reason"):
        audit.load_allowlist(bad)
    assert audit.load_allowlist(ROOT / "docker/audit-allowlist.toml") is not None  # the shipped file parses


def test_skipped_packages_mean_the_database_was_not_asked(tmp_path):
    # pip-audit's PyPI service reports a package it cannot look up as skipped, not as clean: behind a proxy
    # that answers 404 that would pass every package. The gate treats it as unreachable.
    fake = tmp_path / "pip-audit"
    fake.write_text("#!/bin/sh\necho '{\"dependencies\": [{\"name\": \"requests\", \"skip_reason\": "
                    "\"Dependency not found on PyPI\"}], \"fixes\": []}'\nexit 0\n")
    fake.chmod(0o755)
    with pytest.raises(audit.Unreachable, match="skipped requests"):
        audit.run_pip_audit(str(fake), ["requests==2.19.0"])


# --- the Dockerfile's SBOM step ------------------------------------------------------------------------------

def stage_instructions(stage: str) -> list[str]:
    """The instructions (continuation lines joined) of one stage of docker/Dockerfile."""
    text = re.sub(r"\\\n", " ", (ROOT / "docker/Dockerfile").read_text())
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    start = next(i for i, line in enumerate(lines) if re.match(rf"FROM \S+ AS {stage}$", line))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("FROM ")), len(lines))
    return lines[start + 1:end]


def test_sbom_is_written_by_the_last_filesystem_change_of_the_final_stage():
    # Anything that changes the filesystem after the SBOM step would be missing from the image's SBOM. The final
    # stage, image, is both flavors' (FLAVOR picks the stages it is built on).
    changes = [line for line in stage_instructions("image") if line.split()[0] in ("RUN", "COPY", "ADD")]
    assert "from=finish-kit,target=/mnt" in changes[-1], f"the SBOM RUN must come last, not {changes[-1][:80]}"
    assert changes[-1].endswith('/mnt/finish-image.sh "$FLAVOR"')
    kit = stage_instructions("finish-kit")
    assert any("docker/sbom/license_report.py" in line for line in kit)
    assert any("--from=sbom-tools /kit/syft /syft" in line for line in kit)


def test_finish_script_writes_the_sbom_after_every_other_change():
    text = re.sub(r"\\\n", " ", (ROOT / "docker/finish-image.sh").read_text())
    commands = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    scan = next(i for i, line in enumerate(commands) if '"$kit/syft" scan dir:/' in line)
    assert any("pip install" in line for line in commands[:scan])
    after = commands[scan + 1:]
    assert any('"$kit/license_report.py"' in line for line in after)
    # Only the report and read-only checks follow the scan.
    for line in after:
        assert line.startswith(("python \"$kit/license_report.py\"", "grep -q ")), line


def test_a_wheel_without_a_license_field_is_classed_by_its_trove_classifier(tmp_path):
    """pyinstrument 5 (smdebug's profiler) declares its license only as a classifier, which syft does not report."""
    dist_info = tmp_path / "opt/venv/lib/python3.11/site-packages/pyinstrument-5.1.3.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Name: pyinstrument\nVersion: 5.1.3\n"
                                        "Classifier: License :: OSI Approved :: BSD License\nLicense-File: LICENSE\n")
    sbom = {"components": [{"name": "pyinstrument", "version": "5.1.3", "purl": "pkg:pypi/pyinstrument@5.1.3"},
                           {"name": "undeclared", "version": "1.0", "purl": "pkg:pypi/undeclared@1.0"}]}
    by_name = {e.name: e for e in report.entries(sbom, tmp_path)}
    assert by_name["pyinstrument"].licenses == ("BSD License (trove classifier)",)
    assert by_name["pyinstrument"].license_class == report.PERMISSIVE
    assert by_name["undeclared"].license_class == report.UNKNOWN

#!/usr/bin/env python3
"""Vulnerability gate (`make audit`): the Python packages of each flavor's SBOM, audited with pip-audit against
the OSV advisory database; fails on a fixable HIGH or CRITICAL finding that the allowlist does not excuse.

    scripts/audit.py --pip-audit PATH --allowlist docker/audit-allowlist.toml [--strict] out/sbom/*/sbom.cdx.json

Exit 0: nothing to fix (or, without --strict, the advisory database was unreachable: said loudly, nothing
audited). Exit 1: findings to fix, or with --strict an unreachable database. Exit 2: a bad allowlist.
Severity comes from the advisory (GitHub's qualitative severity, on the advisory or its GHSA alias); an
advisory without one counts as HIGH, so an unknown never passes silently.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as a package (requirements-dev.txt, requirements-audit.txt)
    import tomli as tomllib

OSV_API = "https://api.osv.dev/v1"
FAILING_SEVERITIES = frozenset({"HIGH", "CRITICAL", "UNKNOWN"})
# In the image but not on PyPI: nothing to look up.
NOT_ON_PYPI = {
    "sagemaker-mxnet-horovod": "this repository's launcher (container/)",
    "opencv-python": "docker/opencv-python-shim, a stand-in with no code; opencv-python-headless is audited",
}


class Unreachable(Exception):
    """The advisory database could not be asked."""


class AllowlistError(Exception):
    pass


@dataclass(frozen=True)
class Finding:
    package: str
    version: str
    vuln_id: str
    aliases: tuple[str, ...]
    fix_versions: tuple[str, ...]
    severity: str = "UNKNOWN"

    def ids(self) -> set[str]:
        return {self.vuln_id, *self.aliases}


@dataclass(frozen=True)
class AllowEntry:
    vuln_id: str
    package: str
    reason: str


def python_packages(sbom: dict) -> set[tuple[str, str]]:
    """(name, version) of every PyPI component of a CycloneDX SBOM, minus what is not on PyPI."""
    found = set()
    for component in sbom.get("components", ()):
        if unquote(component.get("purl", "")).startswith("pkg:pypi/") and component["name"] not in NOT_ON_PYPI:
            found.add((component["name"], component["version"]))
    return found


def requirement_files(packages: set[tuple[str, str]]) -> list[list[str]]:
    """Pinned requirement lines, split so no file names a package twice (setuptools vendors its own wheel)."""
    files: list[list[str]] = []
    for name, version in sorted(packages):
        target = next((f for f in files if not any(line.startswith(f"{name}==") for line in f)), None)
        if target is None:
            files.append(target := [])
        target.append(f"{name}=={version}")
    return files


def load_allowlist(path: Path) -> list[AllowEntry]:
    data = tomllib.loads(path.read_text())
    entries = []
    for number, item in enumerate(data.get("ignore", []), 1):
        missing = [key for key in ("id", "package", "reason") if not str(item.get(key, "")).strip()]
        if missing:
            raise AllowlistError(f"{path}: entry {number} ({item.get('id', '?')}) lacks {', '.join(missing)}: "
                                 "every entry names the advisory, the package and why it is accepted")
        entries.append(AllowEntry(item["id"], item["package"], item["reason"]))
    return entries


def gate(findings: list[Finding], allowlist: list[AllowEntry]):
    """(failing, allowed [(finding, entry)], reported only, unused allowlist entries). Pure."""
    failing, allowed, reported = [], [], []
    used = set()
    for finding in findings:
        entry = next((e for e in allowlist if e.package == finding.package and e.vuln_id in finding.ids()), None)
        if entry:
            allowed.append((finding, entry))
            used.add(entry)
        elif finding.fix_versions and finding.severity in FAILING_SEVERITIES:
            failing.append(finding)
        else:
            reported.append(finding)
    return failing, allowed, reported, [e for e in allowlist if e not in used]


def severity_of(record: dict) -> str | None:
    value = (record.get("database_specific") or {}).get("severity")
    if not value:
        return None
    value = str(value).upper()
    return "MEDIUM" if value == "MODERATE" else value


def ssl_context(ca_bundle: str | None) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_bundle) if ca_bundle else ssl.create_default_context()


def fetch_json(url: str, context: ssl.SSLContext, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=20, context=context) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        raise Unreachable(f"{url}: HTTP {error.code} {error.reason}") from error
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise Unreachable(f"{url}: {getattr(error, 'reason', error)}") from error


def probe(context: ssl.SSLContext) -> None:
    """One known query, so an unreachable database is reported as such rather than as a clean audit."""
    fetch_json(f"{OSV_API}/query", context, {"package": {"name": "jinja2", "ecosystem": "PyPI"}, "version": "2.4.1"})


def severity(finding: Finding, context: ssl.SSLContext) -> str:
    for vuln_id in sorted(finding.ids(), key=lambda i: not i.startswith("GHSA-")):
        if vuln_id.startswith(("GHSA-", "PYSEC-")):
            found = severity_of(fetch_json(f"{OSV_API}/vulns/{vuln_id}", context))
            if found:
                return found
    return "UNKNOWN"


def run_pip_audit(pip_audit: str, lines: list[str]) -> list[Finding]:
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as requirements:
        requirements.write("\n".join(lines) + "\n")
        requirements.flush()
        done = subprocess.run(
            [pip_audit, "--requirement", requirements.name, "--no-deps", "--disable-pip",
             "--vulnerability-service", "osv", "--format", "json", "--progress-spinner", "off"],
            capture_output=True, text=True, timeout=900)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        if any(word in done.stderr for word in ("ConnectionError", "Max retries", "SSLError", "timed out")):
            raise Unreachable(f"pip-audit could not reach OSV: {tail}") from None
        raise RuntimeError(f"pip-audit failed (exit {done.returncode}): {tail}") from None
    skipped = [d for d in report.get("dependencies", []) if d.get("skip_reason")]
    if skipped:
        raise Unreachable("pip-audit skipped " + ", ".join(f"{d['name']} ({d['skip_reason']})" for d in skipped))
    return [Finding(d["name"], d["version"], v["id"], tuple(v.get("aliases", ())), tuple(v.get("fix_versions", ())))
            for d in report.get("dependencies", []) for v in d.get("vulns", [])]


def describe(finding: Finding) -> str:
    fix = ", ".join(finding.fix_versions) or "no fix released"
    aliases = f" ({', '.join(finding.aliases)})" if finding.aliases else ""
    return f"{finding.package} {finding.version}: {finding.vuln_id}{aliases} {finding.severity}, fixed in: {fix}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sboms", nargs="+", type=Path)
    parser.add_argument("--pip-audit", required=True)
    parser.add_argument("--allowlist", type=Path, required=True)
    parser.add_argument("--strict", action="store_true", help="an unreachable advisory database fails")
    parser.add_argument("--ca-bundle", default=os.environ.get("REQUESTS_CA_BUNDLE") or None)
    args = parser.parse_args(argv)

    try:
        allowlist = load_allowlist(args.allowlist)
    except (AllowlistError, tomllib.TOMLDecodeError, KeyError) as error:
        print(f"audit: bad allowlist: {error}", file=sys.stderr)
        return 2
    context = ssl_context(args.ca_bundle)
    packages = set().union(*(python_packages(json.loads(p.read_text())) for p in args.sboms))
    print(f"audit: {len(packages)} Python packages from {', '.join(map(str, args.sboms))}; "
          f"advisories: OSV ({OSV_API}); allowlist: {args.allowlist} ({len(allowlist)} entries)")
    try:
        probe(context)
        findings = [f for lines in requirement_files(packages) for f in run_pip_audit(args.pip_audit, lines)]
        findings = [Finding(f.package, f.version, f.vuln_id, f.aliases, f.fix_versions, severity(f, context))
                    for f in findings]
    except Unreachable as error:
        print(f"audit: CANNOT REACH THE ADVISORY DATABASE, nothing was audited: {error}", file=sys.stderr)
        return 1 if args.strict else 0

    failing, allowed, reported, unused = gate(findings, allowlist)
    for finding, entry in allowed:
        print(f"audit: allowed: {describe(finding)} -- {entry.reason}")
    for finding in reported:
        print(f"audit: reported (not failing: {'no fix' if not finding.fix_versions else 'severity'}): "
              f"{describe(finding)}")
    for entry in unused:
        print(f"audit: allowlist entry {entry.vuln_id} ({entry.package}) matches no finding: remove it?")
    for finding in failing:
        print(f"audit: FIX: {describe(finding)}", file=sys.stderr)
    print(f"audit: {len(findings)} finding(s): {len(failing)} to fix, {len(allowed)} allowed, "
          f"{len(reported)} reported only")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())

"""Why pip refused a user's requirements.txt with the image's packages held (parse/held_packages.py): the
requirements that conflict with a held version, or ask for a kept-out build of an image's module, read from pip's
ResolutionImpossible report ("The conflict is caused by:"), and the failure that names each package, what was asked
for, by whom, and what the image has."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sagemaker_mxnet_horovod.parse.held_packages import HeldPackages
from sagemaker_mxnet_horovod.parse.settings import KEYS
from sagemaker_mxnet_horovod.parse.values import canonical_package_name

CAUSES = "The conflict is caused by:"
# pip's lines under CAUSES (pip/_internal/resolution/resolvelib/factory.py, the image's pip 26).
CONSTRAINT_LINE = re.compile(r"^The user requested \(constraint\) (?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<spec>\S*)$")
REQUESTED_LINE = re.compile(r"^The user requested (?P<requirement>.+)$")
DEPENDENCY_LINE = re.compile(r"^(?P<parent>\S+ \S+) depends on (?P<requirement>.+)$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
SHOWN = 3  # conflicts named in the failure; the rest are counted


@dataclass(frozen=True)
class Conflict:
    package: str  # the held package or kept-out build (canonical name)
    requirement: str  # as pip wrote it: "numpy>=1.24"
    parent: str | None = None  # who depends on it ("needs-new-numpy 1.0"); None: requirements.txt itself


def cause_lines(output: str) -> list[str]:
    """The lines of every "The conflict is caused by:" block of pip's output, stripped."""
    lines, inside = [], False
    for line in output.splitlines():
        text = line.strip()
        if text == CAUSES:
            inside = True
        elif inside and not text:
            inside = False
        elif inside:
            lines.append(text)
    return lines


def read_conflicts(output: str, held: HeldPackages) -> list[Conflict]:
    """The conflicts with what the image holds, in pip's order, each once. Empty: pip failed for another reason (or
    for a constraint of the user's own)."""
    lines = cause_lines(output)
    ours = {canonical_package_name(m["name"]) for m in map(CONSTRAINT_LINE.match, lines)
            if m and (canonical_package_name(m["name"]) in held.versions or canonical_package_name(m["name"])
                      in held.kept_out)}
    conflicts = []
    for line in lines:
        if CONSTRAINT_LINE.match(line):
            continue
        dependency = DEPENDENCY_LINE.match(line)
        requested = None if dependency else REQUESTED_LINE.match(line)
        requirement = (dependency or requested)["requirement"] if (dependency or requested) else ""
        name = NAME.match(requirement)
        if name and canonical_package_name(name.group()) in ours:
            conflict = Conflict(canonical_package_name(name.group()), requirement,
                                dependency["parent"] if dependency else None)
            if conflict not in conflicts:
                conflicts.append(conflict)
    return conflicts


def describe(conflict: Conflict, held: HeldPackages, source: str) -> str:
    asked = (f"{source} asks for {conflict.requirement}" if conflict.parent is None
             else f"{source} needs {conflict.requirement} ({conflict.parent} depends on it)")
    if conflict.package in held.kept_out:
        module, builds = held.kept_out[conflict.package]
        return f"{asked}, another build of the image's {module} module ({', '.join(builds)})"
    return f"{asked}, but the image holds {conflict.package} {held.versions[conflict.package]}"


def conflict_message(conflicts: list[Conflict], held: HeldPackages, source: str = "requirements.txt") -> str:
    """The failure's text: each conflict (the first SHOWN) and what to do. Short: SageMaker shows 1024 characters."""
    shown = "; ".join(describe(conflict, held, source) for conflict in conflicts[:SHOWN])
    more = f" (and {len(conflicts) - SHOWN} more: see the log)" if len(conflicts) > SHOWN else ""
    names = ",".join(dict.fromkeys(conflict.package for conflict in conflicts))
    return (f"{shown}{more}. Nothing was installed: the image holds its packages at the versions MXNet, Horovod and "
            f"GluonCV were built and tested with. Loosen or drop the requirement, or set the hyperparameter "
            f"{KEYS.requirements_replace}={names} to replace {'them' if ',' in names else 'it'} anyway")

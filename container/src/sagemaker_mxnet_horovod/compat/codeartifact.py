"""AWS CodeArtifact as the sagemaker-training toolkit uses it: with CA_REPOSITORY_ARN set, its pip install of the
user's requirements gets `-i` the repository's PyPI index, with a token the toolkit asks the CodeArtifact API for
(its modules._get_codeartifact_index). Here the same two places, from the ARN alone and without credentials, so that
the launcher can check that both are reachable before the toolkit asks (act/requirements.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sagemaker_mxnet_horovod.core.exits import ConfigError

CA_REPOSITORY_ARN = "CA_REPOSITORY_ARN"
# arn:PARTITION:codeartifact:REGION:ACCOUNT:repository/DOMAIN/REPOSITORY, as the toolkit reads it.
ARN = re.compile(r"^arn:(?P<partition>[^:]+):codeartifact:(?P<region>[^:]+):(?P<account>[^:]+)"
                 r":repository/(?P<domain>[^/]+)/(?P<repository>.+)$")
DNS_SUFFIX = {"aws-cn": "amazonaws.com.cn"}  # every other partition: amazonaws.com


@dataclass(frozen=True)
class CodeArtifactRepository:
    arn: str
    index_url: str  # the repository's pip index, as the toolkit's -i has it but for the token
    api_url: str  # the service endpoint the toolkit asks for the token and the repository's endpoint

    @property
    def label(self) -> str:
        """Where it comes from, in words (the index URL names the domain, account and repository)."""
        return f"{CA_REPOSITORY_ARN}'s CodeArtifact repository"


def codeartifact_repository(arn: str) -> CodeArtifactRepository:
    found = ARN.match(arn.strip())
    if not found:
        raise ConfigError(f"{CA_REPOSITORY_ARN}={arn!r} is not a CodeArtifact repository ARN "
                          f"(arn:aws:codeartifact:REGION:ACCOUNT:repository/DOMAIN/REPOSITORY)")
    suffix = DNS_SUFFIX.get(found["partition"], "amazonaws.com")
    region, domain, account = found["region"], found["domain"], found["account"]
    return CodeArtifactRepository(
        arn=arn.strip(),
        index_url=f"https://{domain}-{account}.d.codeartifact.{region}.{suffix}/pypi/{found['repository']}/simple/",
        api_url=f"https://codeartifact.{region}.{suffix}/")

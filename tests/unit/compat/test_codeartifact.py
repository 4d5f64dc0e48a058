"""codeartifact.py: the toolkit's CA_REPOSITORY_ARN read into the index it installs from and the API it asks for a
token. The expected URLs are AWS's documented forms, written out by hand: the repository endpoint
(https://DOMAIN-ACCOUNT.d.codeartifact.REGION.amazonaws.com/pypi/REPOSITORY/) with the toolkit's /simple/ added."""

import pytest
from sagemaker_mxnet_horovod.compat.codeartifact import codeartifact_repository
from sagemaker_mxnet_horovod.core.exits import ConfigError


def test_the_index_and_the_api_of_a_repository():
    repo = codeartifact_repository("arn:aws:codeartifact:us-west-2:111122223333:repository/my-domain/my-repo")
    assert repo.index_url == "https://my-domain-111122223333.d.codeartifact.us-west-2.amazonaws.com/pypi/my-repo/simple/"
    assert repo.api_url == "https://codeartifact.us-west-2.amazonaws.com/"
    assert repo.label == "CA_REPOSITORY_ARN's CodeArtifact repository"


def test_china_regions_have_their_own_domain():
    repo = codeartifact_repository("arn:aws-cn:codeartifact:cn-north-1:111122223333:repository/d/r")
    assert repo.index_url == "https://d-111122223333.d.codeartifact.cn-north-1.amazonaws.com.cn/pypi/r/simple/"


@pytest.mark.parametrize("arn", ["", "arn:aws:s3:::bucket", "arn:aws:codeartifact:us-west-2:1:domain/my-domain"])
def test_anything_else_is_a_configuration_error_naming_it(arn):
    with pytest.raises(ConfigError, match=r"CA_REPOSITORY_ARN=.* is not a CodeArtifact repository ARN"):
        codeartifact_repository(arn)

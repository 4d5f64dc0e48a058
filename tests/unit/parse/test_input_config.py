"""input_config: inputdataconfig.json's channels and their input modes."""

from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.input_config import parse_input_data_config
from sagemaker_mxnet_horovod.parse.paths import Paths

PATHS = Paths(Path("/opt/ml"))


def test_input_data_config():
    channels = parse_input_data_config({
        "train": {"TrainingInputMode": "Pipe", "ContentType": "application/x-recordio"},
        "test": {"S3DistributionType": "FullyReplicated"},
    })
    assert [(c.name, c.input_mode) for c in channels] == [("test", "File"), ("train", "Pipe")]
    with pytest.raises(ConfigError, match="channel 'train' has TrainingInputMode 'Stream'"):
        parse_input_data_config({"train": {"TrainingInputMode": "Stream"}})
    with pytest.raises(ConfigError, match="channel 'train' must be an object"):
        parse_input_data_config({"train": "s3://x"})

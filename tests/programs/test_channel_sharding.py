"""channel_sharding: which part of a channel each rank reads, ShardedByS3Key by local rank, FullyReplicated
by global rank."""

import pytest
from mxnet_programs import channel_sharding as cs
from mxnet_programs.process import ProgramError

from programs.helpers import LAYOUT, input_config


def test_distribution_defaults_to_fully_replicated():
    assert cs.s3_distribution({}, "train") == cs.FULLY_REPLICATED
    assert cs.s3_distribution({"train": {"TrainingInputMode": "File"}}, "train") == cs.FULLY_REPLICATED
    assert cs.s3_distribution(input_config(train="ShardedByS3Key"), "train") == cs.SHARDED_BY_S3_KEY


def test_unknown_distribution_names_channel_and_value():
    with pytest.raises(ProgramError, match=r"channel 'train' has S3DistributionType 'Sharded'"):
        cs.s3_distribution(input_config(train="Sharded"), "train")


def test_sharded_channel_splits_by_local_rank_replicated_by_global_rank():
    sharded = [cs.shard_for(input_config(train="ShardedByS3Key"), "train", env) for env in LAYOUT]
    assert [(s.index, s.count) for s in sharded] == [(0, 2), (1, 2), (0, 2), (1, 2)]
    assert all(s.per_host for s in sharded)
    assert "ShardedByS3Key" in sharded[0].describe() and "local rank" in sharded[0].describe()
    replicated = [cs.shard_for(input_config(), "train", env) for env in LAYOUT]
    assert [(s.index, s.count) for s in replicated] == [(0, 4), (1, 4), (2, 4), (3, 4)]
    assert "FullyReplicated" in replicated[3].describe() and "global rank" in replicated[3].describe()

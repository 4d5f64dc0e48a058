"""Which part of a File-mode channel each rank reads, from the channel's S3DistributionType.

SageMaker copies a ``FullyReplicated`` channel whole to every host: the ranks of the whole job split it,
rank r of N reading part r of N. A ``ShardedByS3Key`` channel already holds a different part of the
data on each host: only the ranks of that host split it, local rank l of L (ranks per host) reading
part l of L, so together the job reads every host's part once. Pipe-mode channels are outside this:
one FIFO has one reader, and per-rank Pipe channels decide who reads what.

Standard library only (imported before numpy/mxnet), shared by the MNIST and R-CNN programs.
"""

from mxnet_programs.process import ProgramError

FULLY_REPLICATED = "FullyReplicated"
SHARDED_BY_S3_KEY = "ShardedByS3Key"
DISTRIBUTIONS = (FULLY_REPLICATED, SHARDED_BY_S3_KEY)


def s3_distribution(config, channel):
    """The channel's S3DistributionType in inputdataconfig.json; FullyReplicated when not stated (SageMaker's
    default, and what a local run without the config file means). Another value is an error naming it."""
    entry = config.get(channel)
    value = entry.get("S3DistributionType") if isinstance(entry, dict) else None
    if value in (None, ""):
        return FULLY_REPLICATED
    if value not in DISTRIBUTIONS:
        raise ProgramError(f"channel '{channel}' has S3DistributionType {value!r} in the input data "
                                  f"config; expected one of {', '.join(DISTRIBUTIONS)}")
    return value


class Shard:
    """Part `index` of `count` of a channel's data on this host: items index, index + count, ..."""

    def __init__(self, channel, distribution, index, count):
        self.channel, self.distribution, self.index, self.count = channel, distribution, index, count

    @property
    def per_host(self):
        return self.distribution == SHARDED_BY_S3_KEY

    def describe(self):
        """The log line saying how the channel was split (the same words on every rank, its numbers differ)."""
        if self.per_host:
            how = (f"each host holds its own part; the ranks of a host split it by local rank "
                   f"({self.count} per host; this rank reads part {self.index})")
        else:
            how = f"every host holds all of it; all ranks split it by global rank ({self.count} ranks; " \
                  f"this rank reads part {self.index})"
        return f"channel '{self.channel}' is {self.distribution}: {how}"

    def __repr__(self):
        return f"Shard({self.channel!r}, {self.distribution}, {self.index}/{self.count})"


def shard_for(config, channel, env):
    """This rank's Shard of `channel`, given the input data config and the rank layout (sagemaker_env.DistEnv)."""
    distribution = s3_distribution(config, channel)
    if distribution == SHARDED_BY_S3_KEY:
        return Shard(channel, distribution, env.local_rank, env.local_size)
    return Shard(channel, distribution, env.rank, env.size)

"""The single-process backend: the program runs once on this host, without MPI (one process in all,
sagemaker_mpi_enabled=false, or a host outside the distribution instance groups). Its command is the rank's own
command line; it needs no environment rules beyond every job's (env_rules.RULES)."""

from __future__ import annotations

from sagemaker_mxnet_horovod.plan.env_rules import Rule

RULES: tuple[Rule, ...] = ()


def command(rank_argv: tuple[str, ...]) -> tuple[str, ...]:
    """What this host executes: the program, started through rank_env as every rank is."""
    return tuple(rank_argv)

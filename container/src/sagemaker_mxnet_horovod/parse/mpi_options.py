"""The user's MPI options (sagemaker_mpi_custom_mpi_options), parsed once into one value, MpiOptions: what mpirun
gets, the toolkit's own --NCCL_DEBUG taken out, the -mca parameters the user sets (theirs replace the launcher's)
and the variables their -x options export (a file one names counts as the job's output: plan/stray_outputs.py).
Everything after parsing reads these fields; nothing splits or scans the options again.

Parsed with the config, not by the MPI backend when it plans, because every job reads two of its facts: a bad
value is a configuration error whatever the backend (exit 2 before anything runs), and --NCCL_DEBUG sets NCCL_DEBUG
on every job's ranks, as the toolkit's option does on its ranks (plan/env_rules.nccl_debug, a single-process job's
too). The settings table that checks every knob is parse/'s, below the backends (a layer imports none above it), so
the parser is here; what only mpirun gets (for_mpirun, mca_names, exported) is read only in backends/mpi/
(tests/structure/test_backend_seams.py), and the generic plan carries none of it (HostPlan.rank_variables is what
the backend gives every rank)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagemaker_mxnet_horovod.core.exits import ConfigError

MCA_FLAGS = ("-mca", "--mca")
EXPORT_FLAG = "-x"
NCCL_DEBUG_OPTION = "--NCCL_DEBUG"


@dataclass(frozen=True)
class MpiOptions:
    for_mpirun: tuple[str, ...] = ()  # split as a shell would, quoting kept (`-x 'MSG=a b'` one argument)
    nccl_debug: str | None = None  # the toolkit's --NCCL_DEBUG (the last one, as its argparse)
    mca_names: frozenset[str] = frozenset()  # every `-mca NAME VALUE` the user gives
    exported: tuple[tuple[str, str | None], ...] = ()  # `-x NAME=VALUE`: (NAME, VALUE); `-x NAME`: (NAME, None)

    def sets_mca(self, name: str) -> bool:
        return name in self.mca_names

    def exported_values(self, env: Mapping[str, str]) -> dict[str, str]:
        """Each exported variable's value on the ranks: its own, or (`-x NAME`) the environment's, if set there."""
        found = {}
        for name, value in self.exported:
            if value is not None:
                found[name] = value
            elif name in env:
                found[name] = env[name]
        return found


def parse_mpi_options(key: str, value: Any) -> MpiOptions:
    """The knob's parser (parse/settings.py): a ConfigError names the key and what is wrong."""
    if not value:
        return MpiOptions()
    try:
        tokens = tuple(shlex.split(str(value)))
    except ValueError as error:
        raise ConfigError(f"hyperparameter {key}={value!r}: {error}") from None
    nccl_debug, for_mpirun = split_nccl_debug(key, tokens)
    pairs = list(zip(for_mpirun, for_mpirun[1:]))
    return MpiOptions(
        for_mpirun=for_mpirun,
        nccl_debug=nccl_debug,
        mca_names=frozenset(name for flag, name in pairs if flag in MCA_FLAGS),
        exported=tuple(exported(argument) for flag, argument in pairs if flag == EXPORT_FLAG),
    )


def exported(argument: str) -> tuple[str, str | None]:
    name, sep, value = argument.partition("=")
    return (name, value) if sep else (name, None)


def split_nccl_debug(key: str, options: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """The toolkit's own option: `--NCCL_DEBUG=X` or `--NCCL_DEBUG X` sets NCCL_DEBUG on every rank (AWS's Horovod
    examples pass '-verbose --NCCL_DEBUG=INFO'); mpirun would reject it. The last one wins, as with the toolkit's
    argparse. Returns (its value or None, the options for mpirun)."""
    value, rest, i = None, [], 0
    while i < len(options):
        token = options[i]
        if token == NCCL_DEBUG_OPTION:
            if i + 1 >= len(options) or options[i + 1].startswith("-"):
                raise ConfigError(f"hyperparameter {key}: {NCCL_DEBUG_OPTION} needs a value (--NCCL_DEBUG=INFO)")
            value = options[i + 1]
            i += 2
            continue
        if token.startswith(f"{NCCL_DEBUG_OPTION}="):
            value = token.partition("=")[2]
            if not value:
                raise ConfigError(f"hyperparameter {key}: {token!r} needs a value (--NCCL_DEBUG=INFO)")
        else:
            rest.append(token)
        i += 1
    return value, tuple(rest)

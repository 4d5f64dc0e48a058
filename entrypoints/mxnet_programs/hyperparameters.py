"""Hyperparameters as SageMaker sends them (``--key value`` strings) into one frozen config.

``--batch_size`` and ``--batch-size`` are the same key (`normalize_argv`); booleans parse strictly
(`str2bool`); a misspelt key fails instead of matching a prefix; errors are one line, exit 2.
"""

import argparse
import dataclasses
import sys

from mxnet_programs.launch import KVSTORES
from mxnet_programs.process import EXIT_USAGE, stderr_line

# Keys for the launcher, not the program, that reach it anyway: the SDK's sagemaker_* and AWS's parameter-server keys
# (_ps_port, _ps_verbose), which the launcher also passes on to scripts, as AWS's MXNet toolkit did.
LAUNCHER_KEY_PREFIXES = ("sagemaker-", "-ps-")


def normalize_argv(argv):
    """Rewrites ``--some_key`` / ``--some_key=v`` to ``--some-key``; drops ``--sagemaker_*`` and ``--_ps_*`` pairs.

    SageMaker users spell keys both ways; argparse knows one. The SDK's framework estimators add
    ``sagemaker_program``, ``sagemaker_submit_directory`` ... to the hyperparameters, and a parameter-server job
    may set ``_ps_port`` and ``_ps_verbose``: those are for the launcher, not the program, so they are skipped
    here instead of failing as unknown.
    """
    out = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token.startswith("--") and len(token) > 2:
            key, sep, value = token[2:].partition("=")
            key = key.replace("_", "-")
            if key.startswith(LAUNCHER_KEY_PREFIXES):
                has_separate_value = not sep and i + 1 < len(argv) and not argv[i + 1].startswith("--")
                i += 2 if has_separate_value else 1
                continue
            token = f"--{key}{sep}{value}"
        out.append(token)
        i += 1
    return out


def str2bool(text):
    """Strict boolean: true/false (any case) or 1/0. Anything else is an argparse error."""
    value = str(text).strip().lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value: {text!r} (use true/false or 1/0)")


def _integer(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer value: {text!r}") from None


def positive_int(text):
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text):
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def positive_float(text):
    value = non_negative_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def list_text(text):
    """'17,23', or '[17, 23]': the sagemaker-training toolkit passes a JSON list hyperparameter that way."""
    return str(text).strip().removeprefix("[").removesuffix("]")


def add_kvstore_argument(group):
    """--kvstore, which every program takes through the shared skeleton (session.py); its launch rules:
    mxnet_programs/launch.py."""
    group.add_argument("--kvstore", default=None, choices=KVSTORES,
                       help="how gradients are summed: horovod (Horovod over MPI, one rank per device); dist_sync or "
                            "dist_device_sync (MXNet's parameter servers, which the launcher then runs); local or "
                            "device (one process over all devices of one host) [default: horovod, or dist_sync when "
                            "the launcher started the program as a parameter-server worker]")


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows "(default: X)" except for options whose default is None (their help text says it)."""

    def _get_help_string(self, action):
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


class HyperparameterParser(argparse.ArgumentParser):
    """argparse with the programs' conventions: underscores accepted, one-line errors, exit 2.

    No abbreviations: a misspelt hyperparameter (``--epoch``) must fail, not silently match ``--epochs``.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_args(normalize_argv(args), namespace)

    def error(self, message):
        # One line (no usage dump) so the launcher/SageMaker failure reason shows the actual problem.
        stderr_line(f"{self.prog}: error: {message} (see --help)")
        sys.exit(EXIT_USAGE)


def frozen_config(name, namespace, **resolved):
    """The parsed hyperparameters plus values resolved from them (paths...) as one frozen dataclass
    instance: built once, read everywhere, changed nowhere."""
    values = {**vars(namespace), **resolved}
    cls = dataclasses.make_dataclass(name, list(values), frozen=True)
    return cls(**values)

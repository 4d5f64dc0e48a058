"""Values as SageMaker writes them: JSON files, and hyperparameters that arrive as strings. The typed parsers
name the key and the value at fault; the toolkit's decoding and argument formatting are kept exactly."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sagemaker_mxnet_horovod.core.exits import ConfigError

_TRUE = {"true", "1"}
_FALSE = {"false", "0"}


def parse_bool(key: str, value: Any) -> bool:
    """Strict: true/false in any case, 1/0. 'False' is false (the toolkit treats it as a truthy string)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"hyperparameter {key}={value!r} is not a boolean (use true/false or 1/0)")


def parse_int(key: str, value: Any, minimum: int | None = None) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"hyperparameter {key}={value!r} is not an integer")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"hyperparameter {key}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ConfigError(f"hyperparameter {key}={value!r} must be >= {minimum}")
    return number


def parse_float(key: str, value: Any, minimum: float | None = None) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"hyperparameter {key}={value!r} is not a number")
    try:
        number = float(str(value).strip())
    except ValueError:
        raise ConfigError(f"hyperparameter {key}={value!r} is not a number") from None
    if not math.isfinite(number):
        raise ConfigError(f"hyperparameter {key}={value!r} is not a finite number")
    if minimum is not None and number < minimum:
        raise ConfigError(f"hyperparameter {key}={value!r} must be >= {minimum:g}")
    return number


def parse_rank_set(key: str, value: Any) -> frozenset[int] | None:
    """Ranks to pick: 'all' (None), 'none', a rank (0), a list ([0, 1], as JSON decodes it) or a string of ranks
    and ranges ('0,2-3')."""
    if isinstance(value, bool):
        raise ConfigError(f"hyperparameter {key}={value!r} is not a list of ranks (all, none, 0, '0,2-3')")
    text = str(value).strip().lower()
    if text == "all":
        return None
    if text == "none":
        return frozenset()
    parts = [str(v) for v in value] if isinstance(value, list) else text.split(",")
    ranks: set[int] = set()
    for part in (p.strip() for p in parts):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ConfigError(f"hyperparameter {key}={value!r} is not a list of ranks (all, none, 0, '0,2-3')")
        ranks.update(range(int(first), int(last if dash else first) + 1))
    return frozenset(ranks)


ALL_PACKAGES = "all"  # parse_package_names: every package
_PACKAGE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")  # PEP 508's name


def canonical_package_name(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503): 'OpenCV_Python' is 'opencv-python'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_package_names(key: str, value: Any) -> frozenset[str]:
    """Distribution names, canonical: a comma-separated string ('numpy, opencv-python') or a list (as JSON decodes
    it); 'all' alone stands for every package (ALL_PACKAGES)."""
    parts = [str(v) for v in value] if isinstance(value, list) else str(value).split(",")
    names = frozenset(canonical_package_name(part.strip()) for part in parts if part.strip())
    if ALL_PACKAGES in names and len(names) > 1:
        raise ConfigError(f"hyperparameter {key}={value!r}: 'all' stands alone, or name the packages")
    bad = sorted(part.strip() for part in parts if part.strip() and not _PACKAGE_NAME.match(part.strip()))
    if bad or isinstance(value, bool):
        raise ConfigError(f"hyperparameter {key}={value!r} is not a list of package names ('numpy,opencv-python', "
                          f"or all)")
    return names


def decode_hyperparameter(value: Any) -> Any:
    """As the sagemaker-training toolkit reads hyperparameters.json: each value JSON-decoded, else kept as is.

    SageMaker writes every value as a string; SDK v2 JSON-encodes them ('"mnist"', '3', '[1, 2]', 'true'), so
    '3' is the number 3 and 'true' the boolean, while 'False' or 'resnet50_v1b' (not JSON) stay strings. The
    launcher's typed parsers accept both forms, per key.
    """
    try:
        return json.loads(value)
    except (ValueError, TypeError):
        return value


def format_argument(value: Any) -> str:
    """A decoded hyperparameter as the toolkit passes it to the program (mapping.to_cmd_args): Python's str()
    (True, 0.1, [1, 2]), None as '', a dict as k=v,k=v (sorted)."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    return str(value)


def command_line_arguments(program_args: Mapping[str, str]) -> list[str]:
    """The program's arguments as the toolkit builds them: keys sorted, --key value (-k value for one letter)."""
    argv = []
    for key in sorted(program_args):
        argv += [f"--{key}" if len(key) > 1 else f"-{key}", program_args[key]]
    return argv


def load_json(path: Path, required: bool = True) -> Any:
    try:
        text = path.read_text()
    except FileNotFoundError:
        if required:
            raise ConfigError(f"{path} is missing") from None
        return None
    except OSError as error:
        raise ConfigError(f"{path} cannot be read: {error.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as error:
        raise ConfigError(f"{path} is not valid JSON: {error}") from None


def require_str(source: str, data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{source}: '{key}' must be a non-empty string, got {value!r}")
    return value

"""values: hyperparameters as strings, parsed strictly and named when bad; the toolkit's JSON decoding and its
argument formatting, exactly."""

from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.values import (
    command_line_arguments,
    decode_hyperparameter,
    format_argument,
    parse_bool,
    parse_float,
    parse_int,
    parse_package_names,
    parse_rank_set,
)

PATHS = Paths(Path("/opt/ml"))


@pytest.mark.parametrize("text,expected", [
    ("true", True), ("True", True), ("TRUE", True), ("1", True), (" true ", True),
    ("false", False), ("False", False), ("FALSE", False), ("0", False), (True, True), (False, False),
])
def test_bool_parses_strictly(text, expected):
    assert parse_bool("k", text) is expected


@pytest.mark.parametrize("text", ["yes", "no", "", "2", "truee", "none", "on"])
def test_bad_bool_names_key_and_value(text):
    with pytest.raises(ConfigError, match=f"hyperparameter flag={text!r} is not a boolean"):
        parse_bool("flag", text)


def test_ints_and_floats():
    assert parse_int("n", "3") == 3
    assert parse_int("n", " 12 ") == 12
    assert parse_float("x", "0.5") == 0.5
    assert parse_float("x", "1e-3") == 0.001
    with pytest.raises(ConfigError, match="n='3.5' is not an integer"):
        parse_int("n", "3.5")
    with pytest.raises(ConfigError, match="n='two' is not an integer"):
        parse_int("n", "two")
    with pytest.raises(ConfigError, match="is not an integer"):
        parse_int("n", True)
    with pytest.raises(ConfigError, match="n='0' must be >= 1"):
        parse_int("n", "0", minimum=1)
    with pytest.raises(ConfigError, match="x='fast' is not a number"):
        parse_float("x", "fast")
    with pytest.raises(ConfigError, match="not a finite number"):
        parse_float("x", "nan")


@pytest.mark.parametrize("raw,decoded", [
    # As the toolkit: every value JSON-decoded, else kept as it is.
    ('"mnist"', "mnist"),  # SDK v2 JSON-encodes strings
    ("mnist", "mnist"),
    ("3", 3),
    ("0.5", 0.5),
    ("1e-3", 0.001),
    ('"3"', "3"),  # a string that looks like a number stays a string
    ("007", "007"),  # not JSON
    ("true", True),
    ("False", "False"),  # not JSON: the typed parsers read it as false
    ("null", None),
    ('[1, 2]', [1, 2]),
    ('{"a": 1}', {"a": 1}),
    ('"unterminated', '"unterminated'),
    ("", ""),
    (5, 5),  # a hand-written file may hold non-strings
])
def test_decode_hyperparameter(raw, decoded):
    assert decode_hyperparameter(raw) == decoded


@pytest.mark.parametrize("value,argument", [
    (3, "3"), (0.1, "0.1"), (True, "True"), (False, "False"), ("a b", "a b"), ("3", "3"),
    ([1, "a"], "[1, 'a']"), ({"b": 2, "a": True}, "a=True,b=2"), (None, ""),
])
def test_arguments_formatted_as_the_toolkit(value, argument):
    assert format_argument(value) == argument


def test_arguments_sorted_single_letter_keys_one_dash():
    assert command_line_arguments({"lr": "0.1", "b": "2", "epochs": "3"}) == [
        "-b", "2", "--epochs", "3", "--lr", "0.1"]


@pytest.mark.parametrize("value, ranks", [
    ("all", None), ("ALL", None), ("none", frozenset()), (0, frozenset({0})), ("0", frozenset({0})),
    ([0, 3], frozenset({0, 3})), ("0,2-4", frozenset({0, 2, 3, 4})), (" 1 , 5 ", frozenset({1, 5})),
])
def test_rank_sets(value, ranks):
    assert parse_rank_set("mpi_console_ranks", value) == ranks


@pytest.mark.parametrize("value", ["rank0", "-1", "1-", "0,,1", True, 1.5])
def test_a_bad_rank_set_names_key_and_value(value):
    with pytest.raises(ConfigError, match=r"hyperparameter mpi_console_ranks=.* is not a list of ranks"):
        parse_rank_set("mpi_console_ranks", value)


@pytest.mark.parametrize("value, names", [
    ("numpy", {"numpy"}), ("NumPy, OpenCV_Python.Headless", {"numpy", "opencv-python-headless"}),
    (["mxnet-cu112", "numpy"], {"mxnet-cu112", "numpy"}), ("ALL", {"all"}), ("", set()), (" , ", set()),
])
def test_package_names_in_pips_normal_form(value, names):
    assert parse_package_names("sagemaker_requirements_replace", value) == names


@pytest.mark.parametrize("value", ["numpy>=2", "numpy==1.26", "-numpy", "numpy[extra]", True])
def test_a_bad_package_name_names_key_and_value(value):
    with pytest.raises(ConfigError, match=r"hyperparameter sagemaker_requirements_replace=.* is not a list of package "
                                          r"names"):
        parse_package_names("sagemaker_requirements_replace", value)


def test_all_stands_alone():
    with pytest.raises(ConfigError, match=r"'all' stands alone"):
        parse_package_names("sagemaker_requirements_replace", "all,numpy")

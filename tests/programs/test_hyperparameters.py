"""hyperparameters: keys and values as SageMaker sends them, one-line errors, the frozen config."""

import argparse
import dataclasses

import pytest
from mxnet_programs import hyperparameters as hp


def test_hyperparameter_keys_accept_underscores_and_drop_the_launchers_keys():
    argv = ["--batch_size", "32", "--log_interval=5", "--sagemaker_program", "mnist", "--lr", "0.1",
            "--sagemaker_submit_directory=/x", "--_ps_port", "9000", "--_ps_verbose=1", "--save-checkpoints", "false"]
    assert hp.normalize_argv(argv) == [
        "--batch-size", "32", "--log-interval=5", "--lr", "0.1", "--save-checkpoints", "false"]
    # values are never rewritten, negative numbers stay values
    assert hp.normalize_argv(["--name", "a_b", "--x", "-1"]) == ["--name", "a_b", "--x", "-1"]


@pytest.mark.parametrize("text,value", [("true", True), ("TRUE", True), ("True", True), ("1", True),
                                        ("false", False), ("False", False), ("0", False), (" false ", False)])
def test_str2bool_accepts(text, value):
    assert hp.str2bool(text) is value


@pytest.mark.parametrize("text", ["yes", "no", "", "2", "t", "none"])
def test_str2bool_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError, match=repr(text)):
        hp.str2bool(text)


def test_parser_rejects_abbreviations_and_prints_one_line(capsys):
    parser = hp.HyperparameterParser(prog="x")
    parser.add_argument("--epochs", type=int, default=1)
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--epoch", "3"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("x: error: unrecognized arguments: --epoch 3")
    assert parser.parse_args(["--epochs", "3"]).epochs == 3


@pytest.mark.parametrize("text", ["17,23", "[17, 23]", " [17,23] "])
def test_list_text_accepts_the_toolkits_json_lists(text):
    assert hp.list_text(text).replace(" ", "") == "17,23"


def test_frozen_config_holds_parsed_and_resolved_values():
    parser = hp.HyperparameterParser(prog="x")
    parser.add_argument("--epochs", type=hp.positive_int, default=1)
    config = hp.frozen_config("XConfig", parser.parse_args(["--epochs", "4"]), model_dir="/m")
    assert (config.epochs, config.model_dir) == (4, "/m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epochs = 5

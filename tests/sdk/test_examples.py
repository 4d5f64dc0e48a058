"""The example scripts without any SDK installed: --help, argument checks, metric definitions."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sdk_support import GENERATIONS, example_module


def run_example_script(generation: str, *args: str) -> subprocess.CompletedProcess:
    # -S: no site-packages, so nothing the examples do before parsing their arguments may need the SDK.
    return subprocess.run([sys.executable, "-S", str(GENERATIONS[generation].example), *args],
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("generation", ["v2", "v3"])
def test_help_needs_no_sdk(generation):
    done = run_example_script(generation, "--help")
    assert done.returncode == 0, done.stderr
    assert "--local" in done.stdout and "--pipe-shards" in done.stdout


@pytest.mark.parametrize("generation", ["v2", "v3"])
@pytest.mark.parametrize("args, message", [
    (["--pipe-shards", "s3://b/shards", "--local"], "SDK local mode supports File input only"),
    (["--train", "s3://b/train"], "--role is required outside local mode"),
    (["--local"], "give one of --train and --pipe-shards"),
])
def test_bad_arguments_fail_before_the_sdk(generation, args, message):
    done = run_example_script(generation, "--image", "img", "--test", "t", "--output", "o", *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr


@pytest.mark.parametrize("generation", ["v2", "v3"])
def test_metric_definitions_are_the_mnist_programs(generation):
    # mnist imports only the stdlib and the image's launcher package (for RecordIO) at import time; both are on
    # pytest's pythonpath (pytest.ini).
    import mnist
    assert example_module(generation).METRIC_DEFINITIONS == mnist.METRIC_DEFINITIONS

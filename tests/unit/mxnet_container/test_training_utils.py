"""sagemaker_mxnet_container.training_utils, the AWS MXNet toolkit's helpers scripts import: what save()
writes and where. A stand-in records what an mxnet Module would write (the structure test and the integration
test run it with a real Module in the image)."""

import json
from collections import namedtuple

from sagemaker_mxnet_container.training_utils import PARAMS_PATH, SHAPES_PATH, SYMBOL_PATH, save, scheduler_host

DataDesc = namedtuple("DataDesc", "name shape")


class RecordingModule:
    def __init__(self):
        self.symbol = self
        self.data_shapes = [DataDesc("data", (32, 1, 28, 28)), DataDesc("mask", (32,))]

    def save(self, path):  # Module.symbol.save
        open(path, "w").write("symbol")

    def save_params(self, path):
        open(path, "w").write("params")


def test_scheduler_host_is_the_first_host():
    assert scheduler_host(["algo-2", "algo-1"]) == "algo-2"


def test_save_writes_symbol_params_and_shapes_on_the_scheduler_host(tmp_path):
    save(str(tmp_path), RecordingModule(), current_host="algo-1", hosts=["algo-1", "algo-2"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([SYMBOL_PATH, PARAMS_PATH, SHAPES_PATH])
    assert json.loads((tmp_path / SHAPES_PATH).read_text()) == [
        {"name": "data", "shape": [32, 1, 28, 28]}, {"name": "mask", "shape": [32]}]


def test_save_writes_nothing_elsewhere_and_reads_hosts_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-2")
    monkeypatch.setenv("SM_HOSTS", json.dumps(["algo-1", "algo-2"]))
    save(str(tmp_path), RecordingModule())
    assert list(tmp_path.iterdir()) == []

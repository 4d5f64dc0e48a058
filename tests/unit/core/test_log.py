"""log.py: the launcher's one log writes each line whole, "train: " in front, in a single write (a rank's output
from another thread cannot land between the message and its newline)."""

import io

from sagemaker_mxnet_horovod.core import log as log_module


class Writes(io.StringIO):
    def __init__(self):
        super().__init__()
        self.calls = []

    def write(self, text):
        self.calls.append(text)
        return super().write(text)


def test_a_line_is_one_write_with_the_prefix_and_its_newline(monkeypatch):
    stderr = Writes()
    monkeypatch.setattr(log_module.sys, "stderr", stderr)
    log_module.log("job exited with code 0 after 1.0 s")
    assert stderr.calls == ["train: job exited with code 0 after 1.0 s\n"]

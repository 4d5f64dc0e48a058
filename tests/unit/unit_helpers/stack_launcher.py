"""A stand-in for a host's launcher in the stack-dump tests (test_stacks, test_progress): a process that serves
stack requests (stacks.serve_requests) by collecting its host's ranks' stacks into OUTPUT. A uniquely named helper,
as every helper under tests/."""

import os
import subprocess
import sys

from . import unit_paths
from .live_output import wait_for_line

LAUNCHER = """
import sys, time
from pathlib import Path
from sagemaker_mxnet_horovod.act import stacks
run_dir, output = sys.argv[1], Path(sys.argv[2])
def dump(reason):
    name = stacks.dump_name(reason)
    stacks.write_dump(output, name, {"algo-1": stacks.collect_local(run_dir, name)}, reason, print)
stacks.serve_requests(run_dir, dump, print)
print("serving", flush=True)
time.sleep(120)
"""


def start_launcher(run_dir, output) -> subprocess.Popen:
    """The launcher, once it serves requests; the caller kills it."""
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(run_dir), str(output)],
                                env={**os.environ, "PYTHONPATH": str(unit_paths.SRC)}, stdout=subprocess.PIPE,
                                text=True)
    assert wait_for_line(launcher.stdout, "serving", 30), "the stand-in launcher did not start within 30 s"
    return launcher

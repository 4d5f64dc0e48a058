"""SageMaker Debugger through the real SDK v2: the hook and profiler configurations it builds (tests/fixtures/debugger
are exactly what tests/sdk/debugger_requests.py writes from its request builder), and local mode with its default
Debugger settings: the job runs; the hook configuration the SDK built, delivered as SageMaker writes it, makes the
built-in MNIST save tensors that smdebug's trial API reads back from output.tar.gz."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

from sdk_support import DOCKER, GENERATIONS, offline_environment, sdk_python
from tar_within import extract_within

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "debugger"
READ_TRIAL = HERE.parent / "integration" / "code" / "debugger" / "read_trial.py"


def test_the_fixtures_are_what_sdk_v2_builds(tmp_path):
    done = subprocess.run([sdk_python(GENERATIONS["v2"]), str(HERE / "debugger_requests.py"), str(tmp_path / "out")],
                          env=offline_environment(tmp_path / "home"), capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    built = {path.name: path.read_text() for path in (tmp_path / "out").iterdir()}
    assert built == {path.name: path.read_text() for path in FIXTURES.iterdir()}


def test_local_mode_with_the_sdks_default_debugger_settings(run_sdk, image, mnist_data, tmp_path):
    output = tmp_path / "job"
    run = run_sdk("v2", HERE / "local_debugger_job.py", "--local", "--image", image, "--train",
                  str(mnist_data / "train"), "--test", str(mnist_data / "test"), "--output", str(output),
                  "--epochs", "1")
    assert run.returncode == 0, run.describe()
    assert [c.exit_code for c in run.containers] == [0, 0], run.describe()
    assert "SDK DebugHookConfig: {\"S3OutputPath\": \"file://" in run.log
    tensors = tmp_path / "tensors"
    with tarfile.open(run.model_artifacts.with_name("output.tar.gz")) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith("tensors/")]
        extract_within(archive, tmp_path, members)  # refuses a path outside tmp_path, on every host Python
    done = subprocess.run([DOCKER, "run", "--rm", "-v", f"{tensors}:/tensors:ro", "-v", f"{READ_TRIAL}:/read.py:ro",
                           "--entrypoint", "python", image, "/read.py", "/tensors",
                           "softmaxcrossentropyloss0_output_0"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    # SDK v2's default: the losses, every 500 steps, from rank 0.
    assert found["workers"] == ["worker_0"], found
    assert found["tensors"]["softmaxcrossentropyloss0_output_0"]["steps"] == [0], found

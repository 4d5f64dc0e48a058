"""docker/held_packages.py, the build's step that writes the held packages a user's requirements.txt installs with
(/etc/sagemaker-mxnet-horovod/constraints.txt), run on a venv written here; tests/structure/common.yaml checks the
file in the built image."""

import subprocess
import sys
from pathlib import Path

DOCKER = Path(__file__).resolve().parents[2] / "docker"

def test_held_packages_py_writes_the_venvs_packages_and_refuses_a_venv_that_is_not_the_locks(tmp_path):
    """docker/held_packages.py (finish-image.sh): every distribution of the venv at its version, canonical names,
    sorted; a locked package at another version, or missing but for the builder's own tools, fails the build."""
    site = tmp_path / "site"
    for name, version in (("numpy", "1.23.5"), ("opencv_python", "4.11.0.86+headless"), ("Horovod", "0.28.1")):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lock = tmp_path / "constraints-cpu.txt"
    lock.write_text("# the lock\ncmake==3.31.10\nhorovod==0.28.1\nnumpy==1.23.5\n")
    held = tmp_path / "held.txt"

    def run():
        return subprocess.run([sys.executable, str(DOCKER / "held_packages.py"), "cpu", str(lock), str(held),
                               str(site)], capture_output=True, text=True, timeout=60)

    done = run()
    assert done.returncode == 0, done.stderr
    assert [line for line in held.read_text().splitlines() if not line.startswith("#")] == [
        "horovod==0.28.1", "numpy==1.23.5", "opencv-python==4.11.0.86+headless"]
    lock.write_text("numpy==1.26.4\npycocotools==2.0.11\nhorovod==0.28.1\n")
    done = run()
    assert done.returncode != 0
    assert ("held_packages.py: the venv does not match the lock: numpy is 1.23.5 in the venv, 1.26.4 in the lock; "
            "pycocotools==2.0.11 is locked but not installed") in done.stderr

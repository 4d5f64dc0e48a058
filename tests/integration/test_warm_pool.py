"""SageMaker managed warm pools: with SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY set, pip's cache (the user's
requirements.txt) and MXNET_HOME (pretrained weights) live there, so the next job on the instance reuses them; a
single process's own MXNET_HOME, OMP_NUM_THREADS and Horovod stall check win over the launcher's (docs/launcher.md,
"Who wins")."""

import io
import tarfile

from cluster_jobs import JobSpec, run_job

WARM = "/opt/ml/sagemaker/warmpoolcache"
PROGRAM = """\
import os, mxnet, warmdemo
print("MXNET_HOME", os.environ.get("MXNET_HOME"), "data_dir", mxnet.base.data_dir(), "demo", warmdemo.VALUE)
print("user", *(f"{name}={os.environ.get(name)}" for name in ("OMP_NUM_THREADS", "HOROVOD_STALL_CHECK_TIME_SECONDS")))
"""
# The second job's own variables: an MXNET_* and a HOROVOD_* the launcher plans, and OMP_NUM_THREADS.
USERS = {"MXNET_HOME": "/opt/ml/my-mxnet", "OMP_NUM_THREADS": "3", "HOROVOD_STALL_CHECK_TIME_SECONDS": "7"}


def sdist(path):
    """A local sdist: pip builds it into a wheel and caches that wheel (no network needed)."""
    files = {"setup.py": "from setuptools import setup\nsetup(name='warmdemo', version='0.1', py_modules=['warmdemo'])\n",
             "warmdemo.py": "VALUE = 42\n",
             "PKG-INFO": "Metadata-Version: 2.1\nName: warmdemo\nVersion: 0.1\n"}
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(f"warmdemo-0.1/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))


def test_warm_pool_job_keeps_pip_cache_and_mxnet_home(image, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "warm.py").write_text(PROGRAM)
    sdist(code / "warmdemo-0.1.tar.gz")
    (code / "requirements.txt").write_text("--no-index\n--find-links /opt/ml/code\nwarmdemo==0.1\n")
    cache = tmp_path / "warmpoolcache"
    cache.mkdir()

    def job(name, users=None):
        spec = JobSpec(image=image, hosts=1, code_dir=code, timeout_s=120,
                       hyperparameters={"sagemaker_program": "warm.py", "sagemaker_submit_directory": "/opt/ml/code"},
                       # PIP_NO_BUILD_ISOLATION=0 is pip's spelling of --no-build-isolation: setuptools from the
                       # image, as the test has no index to fetch it from.
                       env={"SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": WARM, "PIP_NO_BUILD_ISOLATION": "0",
                            **(users or {})},
                       extra_mounts=[(str(cache), WARM, "rw")])
        result = run_job(spec, tmp_path / name)
        assert result.exit_codes == [0], result.describe()
        return result.master.logs

    first = job("first")
    assert f"MXNET_HOME {WARM}/mxnet data_dir {WARM}/mxnet demo 42" in first
    assert f"PIP_CACHE_DIR={WARM}/pip" in first  # the start log names the default and why
    assert list(cache.glob("pip/wheels/**/warmdemo-0.1-*.whl")), "pip did not cache into the warm pool directory"
    assert "Building wheel for warmdemo" in first

    second = job("second", USERS)
    assert "demo 42" in second
    assert "Building wheel for warmdemo" not in second  # the cached wheel from the first job
    # The user's own variables reached the program unchanged, and the start log names the defaults they replaced.
    assert "MXNET_HOME /opt/ml/my-mxnet data_dir /opt/ml/my-mxnet demo 42" in second
    assert "user OMP_NUM_THREADS=3 HOROVOD_STALL_CHECK_TIME_SECONDS=7" in second
    assert f"MXNET_HOME=/opt/ml/my-mxnet (set by you; default would be {WARM}/mxnet: " in second
    assert "HOROVOD_STALL_CHECK_TIME_SECONDS=7 (set by you; default would be 60: " in second

"""Scripts written for AWS's images, on 2 hosts: a user script that reads SM_* and its arguments (checked against
the sagemaker-training toolkit's own view on each host), AWS's published custom MPI options, and a Horovod-style
MXNet MNIST script that keeps its data next to itself."""

import json
import shutil
import subprocess
import zipfile

import pytest
from cluster_jobs import DOCKER, ROOT
from local_job import JobSpec, run_job

CODE = ROOT / "tests" / "toolkit" / "code"
HPS = {"epochs": 3, "lr": 0.05, "use-fpn": True, "resume": False, "layers": [1, 2], "opts": {"b": 1, "a": "x"},
       "nothing": None, "as-text": "42", "network": "resnet50_v1b", "k": 7}
# AWS's Horovod example passes these verbatim.
AWS_OPTIONS = "-verbose --NCCL_DEBUG=INFO"


def test_user_script_gets_the_toolkits_environment_on_every_host(image, tmp_path):
    hps = {"sagemaker_program": "dump_env.py", "sagemaker_submit_directory": "/opt/ml/code",
           "sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 1,
           "sagemaker_mpi_custom_mpi_options": AWS_OPTIONS, **HPS}
    result = run_job(JobSpec(image=image, hosts=2, hyperparameters=hps, code_dir=CODE, timeout_s=180), tmp_path)
    assert result.exit_codes == [0, 0], result.describe()
    command = next(line for line in result.master.logs.splitlines() if "train: command: mpirun" in line)
    assert " -verbose " in command and "NCCL_DEBUG=INFO" not in command  # -x NCCL_DEBUG, value from the rank env
    for rank, host in enumerate(("algo-1", "algo-2")):
        record = json.loads((tmp_path / host / "output" / "data" / f"rank-{rank}.json").read_text())
        ours, toolkit = record["env"], record["toolkit"]["env"]
        assert record["cwd"] == "/opt/ml/code" and record["data"] == "next to the script"
        assert ours["SM_CURRENT_HOST"] == host  # the toolkit's ranks would all see algo-1 here
        assert ours["NCCL_DEBUG"] == "INFO"
        assert record["argv"] == record["toolkit"]["args"] == [
            "--as-text", "42", "--epochs", "3", "-k", "7", "--layers", "[1, 2]", "--lr", "0.05", "--network",
            "resnet50_v1b", "--nothing", "", "--opts", "a=x,b=1", "--resume", "False", "--use-fpn", "True"]
        assert json.loads(ours["SM_HPS"]) == HPS
        assert json.loads(ours["SM_FRAMEWORK_PARAMS"])["sagemaker_mpi_custom_mpi_options"] == AWS_OPTIONS
        # Every variable the toolkit defines, with its value (SM_NUM_CPUS: the container's, documented).
        missing = set(toolkit) - set(ours)
        assert not missing
        differing = {k for k in toolkit if ours[k] != toolkit[k] and k not in ("SM_NUM_CPUS", "SM_TRAINING_ENV")}
        assert not differing, {k: (ours[k], toolkit[k]) for k in differing}
        ours_env, toolkit_env = json.loads(ours["SM_TRAINING_ENV"]), json.loads(toolkit["SM_TRAINING_ENV"])
        ours_env.pop("num_cpus"), toolkit_env.pop("num_cpus")
        assert ours_env == toolkit_env


@pytest.fixture(scope="module")
def horovod_style_code(image, tmp_path_factory):
    """The Horovod-style script with data-0/ and data-1/mnist.zip next to it (synthetic MNIST from the image)."""
    root = tmp_path_factory.mktemp("hvd")
    subprocess.run([DOCKER, "run", "--rm", "-v", f"{root}:/data", "--entrypoint", "sh", image, "-c",
                    "synth-data mnist /data/mnist"], check=True, capture_output=True)
    code = root / "code"
    code.mkdir()
    shutil.copy(CODE / "hvd_mnist_cwd.py", code)
    for rank in (0, 1):
        (code / f"data-{rank}").mkdir()
        with zipfile.ZipFile(code / f"data-{rank}" / "mnist.zip", "w") as archive:
            for path in (root / "mnist" / "train").iterdir():
                archive.write(path, path.name)
    return code


def test_horovod_style_script_finds_its_data_next_to_itself(image, horovod_style_code, tmp_path):
    hps = {"sagemaker_program": "hvd_mnist_cwd.py", "sagemaker_submit_directory": "/opt/ml/code",
           "sagemaker_mpi_enabled": True, "epochs": 1, "batch-size": 64,
           "sagemaker_mpi_custom_mpi_options": f"{AWS_OPTIONS} -x HOROVOD_TIMELINE=/opt/ml/output/timeline.json"}
    result = run_job(JobSpec(image=image, hosts=2, hyperparameters=hps, code_dir=horovod_style_code,
                             timeout_s=300), tmp_path)
    assert result.exit_codes == [0, 0], result.describe()
    accuracy = [line for line in result.master.logs.splitlines() if "train_accuracy=" in line]
    assert len(accuracy) == 2 and "Downloading" not in result.master.logs, result.describe()
    # The timeline was asked for outside output/data: warned about at the start, copied there at the end.
    assert "WARNING HOROVOD_TIMELINE=/opt/ml/output/timeline.json is outside /opt/ml/output/data" in result.master.logs
    assert (tmp_path / "algo-1" / "output" / "data" / "timeline.json").stat().st_size > 0
    assert "copied /opt/ml/output/timeline.json to /opt/ml/output/data/timeline.json" in result.master.logs

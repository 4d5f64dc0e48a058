"""The image's BASH_ENV hook (docker/sdk-v3-bash-env.sh) acts on SDK v3's MPI driver invocation only: every
other bash, SDK v3's other drivers included, runs as written. (The MPI path itself: test_sdk_user_scripts.py.)"""

from __future__ import annotations

import subprocess

from sdk_support import DOCKER

# What SDK v3 (sagemaker.train.constants) makes the container run when source_code is given.
SDK_V3_COMMAND = ("chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh "
                  "&& /opt/ml/input/data/sm_drivers/sm_train.sh")
HOOK_LINE = "sdk-v3: SDK v3 MPI driver invocation"


def run_bash(image, command, *mounts):
    volumes = [arg for mount in mounts for arg in ("-v", mount)]
    return subprocess.run([DOCKER, "run", "--rm", *volumes, "--entrypoint", "/bin/bash", image, "-c", command],
                          capture_output=True, text=True, timeout=120, check=False)


def test_other_bash_commands_are_untouched(image):
    done = run_bash(image, "echo plain; test -n \"$BASH_ENV\" && echo hook-installed")
    assert done.returncode == 0 and done.stdout.split() == ["plain", "hook-installed"], done
    assert HOOK_LINE not in done.stderr


def test_sdk_v3_single_script_driver_runs_as_the_sdk_wrote_it(image, tmp_path):
    drivers = tmp_path / "sm_drivers"
    drivers.mkdir()
    # A v3 job without distributed=: sm_train.sh runs the basic script driver (here: a stand-in line).
    (drivers / "sm_train.sh").write_text('\n#!/bin/bash\necho "Running Basic Script driver"\n')
    done = run_bash(image, SDK_V3_COMMAND, f"{drivers}:/opt/ml/input/data/sm_drivers")
    assert done.returncode == 0 and done.stdout.strip() == "Running Basic Script driver", done
    assert HOOK_LINE not in done.stderr


def test_sdk_v3_mpi_driver_with_bad_files_fails_with_exit_2(image, tmp_path):
    drivers, output = tmp_path / "sm_drivers", tmp_path / "output"
    drivers.mkdir()
    output.mkdir()
    (drivers / "sm_train.sh").write_text(
        "\n#!/bin/bash\n$SM_PYTHON_CMD /opt/ml/input/data/sm_drivers/distributed_drivers/mpi_driver.py\n")
    (drivers / "sourcecode.json").write_text('{"source_dir": "/code", "entry_script": null}')
    (drivers / "distributed.json").write_text('{"process_count_per_node": 1, "mpi_additional_options": null}')
    done = run_bash(image, SDK_V3_COMMAND, f"{drivers}:/opt/ml/input/data/sm_drivers", f"{output}:/opt/ml/output")
    assert done.returncode == 2 and HOOK_LINE in done.stderr, done
    failure = (output / "failure").read_text()
    assert failure.startswith("invalid job configuration: SDK v3 SourceCode.entry_script=None"), failure

"""Run a SageMaker-like training job on N local containers of the image: the same files, network and
`docker run IMAGE train` that SageMaker uses, without an AWS account.

Each host gets its own /opt/ml (a directory under --workdir) with resourceconfig.json, hyperparameters.json
and inputdataconfig.json; containers join a private network under the names algo-1..algo-N, while their own
hostnames are random (as in SDK local mode, where the hostname is the container id). Channels are
bind-mounted read-only (File and FastFile mode alike: a mount read on demand); Pipe-mode channels are fed through
FIFOs <channel>_<epoch> as SageMaker does. A ShardedByS3Key channel gives each host its own part, as SageMaker
does: `--channel train=part1,part2:ShardedByS3Key` (one directory per host, in host order).

  PYTHONPATH=scripts python3 -m local_job --image sagemaker-mxnet-horovod:cpu --hosts 2 \\
      --hp sagemaker_program=mnist --hp epochs=2 --channel train=data/train --channel test=data/test

Used by the integration tests, the fault suite, `make demo` and the benchmarks (import run_job from here; scripts/
on the import path: pytest.ini's pythonpath, or the repo root as `scripts.local_job`). Stdlib only. What a job is and
returns: spec.py; its steps: run.py; its containers: containers.py; each host's /opt/ml: hosts.py; the same job
under the sagemaker-training toolkit's MPI runner: toolkit.py; the command line: __main__.py.
"""

from .containers import DOCKER, RunningJob, docker_time
from .run import run_job
from .spec import Channel, HostResult, JobResult, JobSpec

# What the integration tests, `make demo`, the fault suite and the benchmarks import from here.
__all__ = ["DOCKER", "Channel", "HostResult", "JobResult", "JobSpec", "RunningJob", "docker_time", "run_job"]

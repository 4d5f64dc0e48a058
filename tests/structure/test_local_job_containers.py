"""scripts/local_job/containers.py's reading of docker's timestamps (the demo's and the multi-container tests' job
times), on every host Python: its UTC is datetime.timezone.utc, not 3.11's datetime.UTC; and a host's CPU limit as
`docker run` gets it."""

import calendar
from pathlib import Path

from local_job import JobSpec
from local_job.containers import docker_run_args, docker_time


def test_a_docker_timestamp_is_its_seconds_since_the_epoch_to_the_microsecond():
    # calendar.timegm reads the fields as UTC: the answer computed without datetime.
    expected = calendar.timegm((2026, 11, 27, 18, 39, 33, 0, 0, 0)) + 0.123456789
    assert abs(docker_time("2026-11-27T18:39:33.123456789Z") - expected) < 1e-6
    assert docker_time("2026-11-27T18:39:33Z") == calendar.timegm((2026, 11, 27, 18, 39, 33, 0, 0, 0))


def test_docker_s_zero_time_is_no_time():
    assert docker_time("0001-01-01T00:00:00Z") is None
    assert docker_time("") is None


def limits(spec, host):
    args = docker_run_args(spec, Path("/tmp/job"), host, "smj-x", "smj-x-net", None, alias=True)
    return [arg for index, arg in enumerate(args) if arg.startswith("--cpu") or args[index - 1].startswith("--cpu")]


def test_a_hosts_cpu_limit_is_docker_s_cpus():
    spec = JobSpec(image="image", cpus={"algo-1": "0.6", "algo-2": "0.3"})
    assert limits(spec, "algo-1") == ["--cpus", "0.6"]
    assert limits(spec, "algo-2") == ["--cpus", "0.3"]
    assert limits(JobSpec(image="image"), "algo-3") == []

"""scripts/local_job/containers.py's reading of docker's timestamps (the demo's and the multi-container tests' job
times), on every host Python: its UTC is datetime.timezone.utc, not 3.11's datetime.UTC."""

import calendar

from local_job.containers import docker_time


def test_a_docker_timestamp_is_its_seconds_since_the_epoch_to_the_microsecond():
    # calendar.timegm reads the fields as UTC: the answer computed without datetime.
    expected = calendar.timegm((2026, 11, 27, 18, 39, 33, 0, 0, 0)) + 0.123456789
    assert abs(docker_time("2026-11-27T18:39:33.123456789Z") - expected) < 1e-6
    assert docker_time("2026-11-27T18:39:33Z") == calendar.timegm((2026, 11, 27, 18, 39, 33, 0, 0, 0))


def test_docker_s_zero_time_is_no_time():
    assert docker_time("0001-01-01T00:00:00Z") is None
    assert docker_time("") is None

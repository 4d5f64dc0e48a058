"""The straggler report across containers, on by default: 2 hosts x 2 ranks of a user's Gluon script with no code
for it (code/slow_rank.py), made slow on one rank (a sleep) and, in another job, on one host (each step's work
twice). The log and the report name that rank or host, by a lateness within 20% of what the script measured in the
same run: the sleep; the ranks' arrivals on the one clock the containers on this machine share. The first job is
stopped (SIGTERM) once rank 0 said its first verdict: the report still holds what rank 0 had written, and the
launcher still says it and draws the chart.
A balanced job names none: test_mnist_cluster.py (the built-in program) and the recorded jobs of
tests/unit/mxnet_straggler. Each job here takes a minute or two on 2 cores."""

import json
import statistics
import struct

import pytest
from cluster_jobs import CODE_DIR
from local_job import JobSpec, run_job

# Both compare the lateness the report measured with the delay the ranks measured: CPU time to spare (docs/testing.md).
pytestmark = pytest.mark.alone

REPORT = "/opt/ml/output/data/straggler/report.json"
CHART = "/opt/ml/output/data/straggler/lateness.png"


def straggler_job(image, workdir, hps, **spec):
    # One step in 10 timed, not one about every 10 s: jobs of a minute (tests/image/test_straggler.py: the spacing).
    hyperparameters = {"sagemaker_program": "slow_rank.py", "sagemaker_submit_directory": "/opt/ml/code",
                       "sagemaker_mpi_num_of_processes_per_host": "2", "mpi_peer_timeout_s": "60",
                       "horovod_straggler_every_s": "0", **hps}
    return run_job(JobSpec(image=image, hosts=2, hyperparameters=hyperparameters, code_dir=CODE_DIR, timeout_s=600,
                           **spec), workdir)


def records(result):
    """Each rank's own measurements (slow_rank.py), from its host's model directory."""
    return {record["rank"]: record for host in result.hosts for record in
            (json.loads(path.read_text()) for path in (host.root / "model").glob("rank-*.json"))}


def report_of(result):
    return json.loads((result.master.root / REPORT.removeprefix("/opt/ml/")).read_text())


def assert_chart_drawn(result):
    png = (result.master.root / CHART.removeprefix("/opt/ml/")).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1000, 700)
    assert f"train: straggler report: {REPORT}, chart {CHART}" in result.master.logs


def stop_after_rank_0s_first_line(job):
    """SageMaker's stop (SIGTERM to the master's container) once rank 0 said its first verdict: slow_rank.py has no
    handler, its ranks end at once, rank 0 without writing at exit."""
    job.wait_for_log("algo-1", "straggler report: steps 30-220: ", timeout=300)
    job.signal("algo-1", "TERM")


def test_a_rank_sleeping_each_step_is_named_by_its_measured_sleep_and_a_stopped_job_keeps_the_report(image, tmp_path):
    # With fp16 gradient compression: its wrap of DistributedTrainer and the recorder's compose.
    result = straggler_job(image, tmp_path, {"slow-rank": "3", "extra-s": "0.1", "steps": "600",
                                             "horovod_gradient_compression": "fp16"},
                           during=stop_after_rank_0s_first_line)
    assert result.during_error is None and result.exit_codes[0] == 143, result.describe()
    assert result.master.failure.startswith("stopped by SIGTERM")
    logs = result.master.logs
    assert "hvd.DistributedTrainer compresses gradients to fp16" in logs
    # Rank 0's line once 20 steps were timed (one in 10 after the 20th), during the job.
    assert "<stderr>:straggler report: steps 30-220: rank 3 on algo-2 reaches each step " in logs, logs[-3000:]
    report = report_of(result)
    # What rank 0 had written when it was stopped: every line it said is on disk.
    assert 220 <= report["steps"]["last_timed"] < 600
    verdict = report["verdict"]
    assert verdict["stands_out"]
    assert (verdict["ranks"], verdict["host"], verdict["whole_host"]) == ([3], "algo-2", False)
    assert f"train: straggler report: {verdict['text']}" in logs  # the launcher's, at the end, after the stop
    slept = statistics.median(records(result)[3]["slept_s"])
    assert report["ranks"][3]["median_lateness_s"] == pytest.approx(slept, rel=0.2)
    assert report["ranks"][3]["late_share"] >= 0.9
    waited = [rank["waited_on_others_s"] for rank in report["ranks"]]
    assert waited[3] < min(waited[:3]) and min(waited[:3]) > 0.5 * slept * report["ranks"][0]["steps"]
    assert_chart_drawn(result)


def test_a_host_half_as_fast_as_the_other_is_named_by_the_delay_it_measured(image, tmp_path):
    """algo-2's ranks run each step's forward and backward twice: a host that takes twice as long for a step's work.
    Both containers are ahead of other work on this machine (cpu shares); a step of this size needs about 0.1 CPU-s
    per rank. Not a CPU quota: a throttled container stands still until its next period, also right after the
    ranks' meeting ends, so its ranks note that end late and their lateness comes out short by the stall: with a 10 ms
    period, 0.67 (half the CPU) and 0.77 (a quarter) of the arrivals' in CI, 0.99 here (docs/straggler.md), an error
    of the emulation, not of the report, that 20% cannot hold."""
    result = straggler_job(image, tmp_path, {"steps": "140", "hidden": "1024", "batch": "128", "slow-host": "algo-2",
                                             "passes": "2"}, cpu_shares=16384)
    assert result.exit_codes == [0, 0], result.describe()
    report = report_of(result)
    # Written at exit: every timed step's figures rank 0 received. The ranks meet at steps 30, 40, ..., 140 and each
    # meeting brings the figures of the one before: steps 30-130, each standing for 10 steps (11 samples: a verdict
    # needs 5, and a host is named when late in 3 of 4 or more: with 7 samples, 5 of 7 late was too few now and then).
    assert report["steps"] == {"first_timed": 30, "last_timed": 130, "timed_every": 10, "timed_every_s": 0,
                               "start_steps_not_timed": 20, "samples": 11, "samples_kept": 11, "last_met": 140}
    assert [rank["steps"] for rank in report["ranks"]] == [110] * 4
    verdict = report["verdict"]
    assert verdict["stands_out"] and (verdict["host"], verdict["whole_host"], verdict["ranks"]) == ("algo-2", True,
                                                                                                   [2, 3])
    assert "train: straggler report: algo-2 (ranks 2, 3) reaches each step " in result.master.logs
    # The same, from the ranks' arrivals on the one clock every container on this machine shares (a real job's hosts
    # do not; the report never compares clocks): at each step the report timed (the script's step s - 1), how long
    # after the median rank (the earlier of the two middle ones) algo-2's later rank arrived.
    arrivals = {rank: record["ready_s"] for rank, record in records(result).items()}
    true_lateness = statistics.median(
        max(arrivals[2][step - 1], arrivals[3][step - 1]) - sorted(a[step - 1] for a in arrivals.values())[1]
        for step in report["samples"]["step"])
    assert verdict["lateness_s"] == pytest.approx(true_lateness, rel=0.2)
    assert_chart_drawn(result)

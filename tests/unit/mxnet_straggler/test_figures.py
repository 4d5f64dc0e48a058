"""figures.py: lateness from waits alone, the verdict, and what rank 0 keeps; on figures worked out by hand, and on
the figures of real 2-host x 2-rank jobs recorded on this project's 2-core machine (recorded/: balanced jobs name no
rank; a rank sleeping 0.1 s a step, and a host with half the CPU, are named)."""

import json
import math
from pathlib import Path

import pytest
from sagemaker_mxnet_straggler.figures import (
    MIN_SAMPLES,
    Figures,
    Sample,
    judge,
    lateness,
    reference_wait,
    seconds,
    steps_between_timed,
)
from sagemaker_mxnet_straggler.report import samples_of

RECORDED = Path(__file__).parent / "recorded"
HOSTS = ["algo-1", "algo-1", "algo-2", "algo-2"]


def figures(late_by_rank, step_s=0.5, samples=10, hosts=HOSTS, transfer=0.01):
    """Samples of a job whose ranks arrive late_by_rank after the earliest: each rank waits for the latest arrival
    plus the transfer; every rank's step takes step_s."""
    result = Figures(list(hosts))
    latest = max(late_by_rank)
    for index in range(samples):
        waits = [latest - late + transfer for late in late_by_rank]
        times = [math.nan] * len(hosts) if index == 0 else [step_s] * len(hosts)
        result.add(Sample(20 + 10 * index, 5.0 * index, waits, times), 10)
    return result


def test_lateness_is_the_median_ranks_wait_minus_each_ranks_own():
    # Rank 1 arrives 0.2 s after the others: it waits only for the transfer, they wait 0.2 s more.
    assert lateness([0.30, 0.10, 0.30, 0.30]) == pytest.approx([0.0, 0.2, 0.0, 0.0])
    # Three ranks, the last one 0.15 s late.
    assert lateness([0.2, 0.2, 0.05]) == pytest.approx([0.0, 0.0, 0.15])


def test_half_the_ranks_late_are_measured_against_the_others_not_against_a_point_between():
    # Host algo-2's two ranks arrive ~0.23 s after algo-1's: the median rank is algo-1's later one (wait 0.24).
    assert reference_wait([0.25, 0.24, 0.01, 0.02]) == 0.24
    assert lateness([0.25, 0.24, 0.01, 0.02]) == pytest.approx([-0.01, 0.0, 0.23, 0.22])


def test_a_rank_a_tenth_of_a_step_late_or_more_is_named_with_the_share_of_the_time_the_others_wait():
    verdict = judge(figures([0, 0, 0, 0.1]))
    assert verdict.stands_out and verdict.ranks == (3,) and verdict.host == "algo-2"
    assert verdict.lateness_s == pytest.approx(0.1) and verdict.step_s == 0.5 and verdict.share == pytest.approx(0.2)
    assert verdict.text() == ("rank 3 on algo-2 reaches each step 0.10 s after the median rank (step 0.50 s): "
                              "the other ranks wait 20% of the time for it")


def test_a_rank_late_by_as_much_but_in_only_half_the_steps_is_not_named():
    result = Figures(list(HOSTS))
    for index in range(20):
        late = 0.2 if index % 2 else 0.0  # a rank hit now and then (other work on its host), not a slow rank
        result.add(Sample(20 + 10 * index, 5.0 * index, [0.21, 0.21, 0.21, 0.21 - late], [0.5] * 4), 10)
    assert result.late_shares() == [0.0, 0.0, 0.0, 0.5]
    assert result.rank_medians()[0][3] == pytest.approx(0.1)  # a fifth of a step: the median alone would name it
    assert judge(result).text() == ("no rank stands out: the latest, rank 3 on algo-2, is 0.10 s after the median rank "
                                    "(step 0.50 s) but late in only 50% of the steps")


def test_a_rank_less_late_than_that_is_said_but_not_named():
    verdict = judge(figures([0, 0, 0, 0.04]))
    assert not verdict.stands_out
    assert verdict.text() == ("no rank stands out: the latest, rank 3 on algo-2, reaches each step 0.040 s after the "
                              "median rank (step 0.50 s), 8.0% of a step")


def test_a_host_whose_ranks_are_all_late_is_named_as_the_host():
    verdict = judge(figures([0, 0.01, 0.2, 0.15]))
    assert verdict.stands_out and verdict.whole_host and verdict.ranks == (2, 3)
    # Measured against algo-1's later rank (0.01): 0.19 s and 0.14 s; the text gives the later of the two at each step.
    assert verdict.text() == ("algo-2 (ranks 2, 3) reaches each step 0.19 s after the median rank (step 0.50 s): "
                              "the other ranks wait 38% of the time for it")


def test_a_host_whose_ranks_take_turns_being_late_is_named_when_the_host_is_late_consistently():
    result = Figures(list(HOSTS))
    for index in range(20):
        turn = (0.3, 0.0) if index % 2 else (0.0, 0.3)  # one of algo-2's ranks late by 0.3 s each step, in turn
        result.add(Sample(20 + 10 * index, 5.0 * index, [0.31, 0.31, 0.31 - turn[0], 0.31 - turn[1]], [1.0] * 4), 10)
    assert result.late_shares() == [0.0, 0.0, 0.5, 0.5] and result.late_share((2, 3)) == 1.0
    verdict = judge(result)
    assert verdict.stands_out and verdict.whole_host and verdict.ranks == (2, 3)
    # Each step the others wait 0.3 s for one of them, though each rank's own median is 0.15 s (half 0.3, half 0).
    assert result.rank_medians()[0][2:] == pytest.approx([0.15, 0.15]) and verdict.lateness_s == pytest.approx(0.3)


def test_one_late_rank_of_several_on_a_host_is_named_alone_and_other_late_ranks_are_added():
    verdict = judge(figures([0, 0.1, 0, 0.2, 0, 0], hosts=["algo-1"] * 3 + ["algo-2"] * 3))
    assert verdict.ranks == (3,) and not verdict.whole_host and verdict.also == ((1, "algo-1", pytest.approx(0.1)),)
    assert verdict.text().endswith("the other ranks wait 40% of the time for it; also rank 1 on algo-1, 0.10 s")


def test_a_host_with_every_rank_of_the_job_is_a_rank_not_a_host():
    verdict = judge(figures([0, 0, 0.3], hosts=["algo-1"] * 3))
    assert verdict.ranks == (2,) and not verdict.whole_host


def test_no_verdict_from_too_few_samples():
    verdict = judge(figures([0, 0, 0, 1.0], samples=MIN_SAMPLES - 1))
    assert not verdict.stands_out and verdict.text() == f"fewer than {MIN_SAMPLES} timed steps: no verdict"
    assert judge(figures([0, 0, 0, 1.0], samples=MIN_SAMPLES)).stands_out


def test_time_waited_sums_each_samples_wait_beyond_the_latest_ranks_over_the_steps_it_stands_for():
    result = figures([0, 0, 0, 0.2], samples=4)  # the first sample has no step time: 3 samples of 10 steps
    assert result.timed_steps == 30
    assert result.waited_s == pytest.approx([6.0, 6.0, 6.0, 0.0])  # 0.2 s x 30 steps each


def test_rank_0_keeps_an_even_spread_of_a_long_job_and_exact_sums():
    hosts = ["algo-1"] * 100
    result = Figures(hosts)
    capacity = result.capacity
    assert capacity == 2000  # 200,000 values over 100 ranks
    for index in range(3 * capacity):
        result.add(Sample(index, float(index), [0.1] * 99 + [0.0], [0.5] * 100), 1)
    assert result.received == 3 * capacity and result.timed_steps == 3 * capacity
    assert result.waited_s[0] == pytest.approx(0.1 * 3 * capacity)
    assert capacity // 2 <= len(result.kept) <= capacity and result.stride == 4
    steps = [sample.step for sample in result.kept]
    assert steps == list(range(0, 3 * capacity, 4))


def test_a_log_lines_window_holds_the_samples_after_the_last_line():
    window = figures([0, 0, 0, 0.1], samples=10).since(60)
    assert [sample.step for sample in window.kept] == [70, 80, 90, 100, 110]
    assert (window.first_step, window.last_step) == (70, 110)


def test_seconds_have_two_significant_digits():
    assert [seconds(v) for v in (0.21, 1.3, 0.0042, 12.0, 0.096, 0.0995, 0.0)] == [
        "0.21 s", "1.3 s", "0.0042 s", "12 s", "0.096 s", "0.10 s", "0 s"]


def test_timed_steps_are_about_the_spacing_in_seconds_apart_and_at_least_ten_steps():
    # By hand: 10 s of 65 ms steps is 153.8 steps; of 0.5 s steps 20; of 2 s steps 5, fewer than 10.
    assert steps_between_timed(0.065, 10.0) == 154
    assert steps_between_timed(0.5, 10.0) == 20
    assert steps_between_timed(2.0, 10.0) == 10
    # Not known yet (the first meeting brings no step time), or no spacing asked for: one in 10.
    assert steps_between_timed(math.nan, 10.0) == 10
    assert steps_between_timed(0.0, 10.0) == 10
    assert steps_between_timed(0.065, 0.0) == 10


def test_the_charts_subtitle_says_how_the_steps_were_timed():
    from sagemaker_mxnet_straggler.chart import timed_how

    assert timed_how({"timed_every": 10, "timed_every_s": 0}) == "one in 10 timed"
    assert timed_how({"timed_every": 10, "timed_every_s": 10.0}) == "one in 10 timed"  # long steps: 10 apart
    assert timed_how({"timed_every": 154, "timed_every_s": 10.0}) == "one about every 10 s timed, the last 1 in 154"
    assert timed_how({"timed_every": 10}) == "one in 10 timed"  # a report written before timed_every_s


def recorded(name):
    report = json.loads((RECORDED / f"{name}.json").read_text())
    result = Figures([rank["host"] for rank in report["ranks"]])
    for step, at, waits, times, spanned in samples_of(report):
        result.add(Sample(step, at, waits, times), spanned)
    return report, result


@pytest.mark.parametrize("name", ["balanced-1", "balanced-2", "balanced-3", "balanced-4", "balanced-mnist-2x1",
                                  "balanced-mnist-2x2"])
def test_recorded_balanced_jobs_name_no_rank(name):
    _, result = recorded(name)
    verdict = judge(result)
    assert not verdict.stands_out, verdict.text()


def test_a_recorded_job_with_a_rank_sleeping_a_tenth_of_a_second_a_step_names_it():
    report, result = recorded("rank-3-sleeps-0.1s")
    verdict = judge(result)
    assert verdict.stands_out and verdict.ranks == (3,) and verdict.host == "algo-2"
    assert verdict.lateness_s == pytest.approx(report["slept_median_s"], rel=0.2)


def test_a_recorded_job_with_a_host_at_half_the_cpu_names_the_host():
    _, result = recorded("algo-2-half-cpu")
    verdict = judge(result)
    assert verdict.stands_out and verdict.whole_host and verdict.host == "algo-2" and verdict.ranks == (2, 3)


def test_the_ranks_read_the_spacing_from_the_environment_and_say_when_it_is_not_seconds(capsys):
    from sagemaker_mxnet_straggler.recorder import every_s_of

    assert every_s_of({}) == 10.0
    assert every_s_of({"SMMH_STRAGGLER_EVERY_S": "2.5"}) == 2.5
    assert every_s_of({"SMMH_STRAGGLER_EVERY_S": "0"}) == 0.0
    assert capsys.readouterr().err == ""
    for wrong in ("often", "-1", "inf", "nan"):
        assert every_s_of({"SMMH_STRAGGLER_EVERY_S": wrong}) == 10.0
        assert capsys.readouterr().err == (
            f"straggler report: SMMH_STRAGGLER_EVERY_S={wrong!r} is not a number of seconds: a step timed about "
            "every 10 s\n")

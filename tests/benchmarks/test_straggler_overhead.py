"""benchmarks.straggler_overhead: what the report's timed steps add to a Faster R-CNN job, from rank 0's iteration
lines (each over its own iteration of 2 images), and the same arithmetic where nothing is timed (placebos)."""

import pytest

from benchmarks.straggler_overhead import iteration_seconds, timed_phase_rate, timed_steps_cost


def rcnn_logs(seconds: dict[int, float]) -> str:
    return "\n".join(f"[1,0]<stdout>:epoch=0 iter={i} loss=1.0 rpn_cls=0.6 lr=0.01 samples_per_sec={2 / t!r}"
                     for i, t in sorted(seconds.items()))


def test_the_timed_iterations_and_the_next_ones_extra_time_over_the_job_at_its_usual_pace():
    # 50 iterations of 2 s, but: start-up (1-21) and a timed last iteration (50) left out; the timed 30 and 40 take
    # 3 s, the one after 30 takes 2.5 s, after 40 the usual 2 s; 25 and 26 (a placebo pair, offset 5) 1 s more each.
    seconds = {i: 2.0 for i in range(1, 51)} | {1: 30.0, 20: 9.0, 21: 4.0, 30: 3.0, 31: 2.5, 40: 3.0, 50: 9.0,
                                                 25: 3.0, 26: 3.0}
    timed, placebos = timed_steps_cost(iteration_seconds(rcnn_logs(seconds)))
    # Iterations 22-49 took 28 x 2 s + 1 + 0.5 + 1 (+ 2 at 25-26) against 56 s at the usual pace: 2.5 s over 56.
    assert timed == pytest.approx(2.5 / 56)
    # Offsets 2-8 (22-23, 32-33, 42-43; ...; 28-29, 38-39, 48-49): offset 5's pairs hold 25 and 26 (2 s more),
    # offset 4's (24-25, ...) and 6's (26-27, ...) one of them (1 s).
    assert placebos == pytest.approx([0, 0, 1 / 56, 2 / 56, 1 / 56, 0, 0])


def test_a_job_at_an_even_pace_costs_nothing_whatever_its_noise_elsewhere():
    seconds = {i: 2.0 + (0.4 if i % 7 == 0 and i % 10 not in (0, 1) else 0.0) for i in range(1, 46)}
    assert timed_steps_cost(iteration_seconds(rcnn_logs(seconds)))[0] == pytest.approx(0.0)


def test_the_rate_after_the_20th_iteration_is_every_image_over_every_second_the_timed_ones_included():
    seconds = {20: 4.0, 21: 20.0, 22: 10.0, 23: 5.0}  # by hand: 6 images in 35 s after the 20th
    assert timed_phase_rate(iteration_seconds(rcnn_logs(seconds))) == pytest.approx(6 / 35)

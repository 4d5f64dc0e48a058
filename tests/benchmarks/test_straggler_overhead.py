"""benchmarks.straggler_overhead: what the report's timed steps add to a Faster R-CNN job, from rank 0's iteration
lines (each over its own iteration of 2 images), or to an MNIST job, from its lines per step, and the same arithmetic
where nothing is timed (placebos)."""

import pytest

from benchmarks.straggler_overhead import (
    iteration_seconds,
    mnist_step_seconds,
    six_steps_share,
    timed_phase_rate,
    timed_steps,
    timed_steps_cost,
)


def rcnn_logs(seconds: dict[int, float]) -> str:
    return "\n".join(f"[1,0]<stdout>:epoch=0 iter={i} loss=1.0 rpn_cls=0.6 lr=0.01 samples_per_sec={2 / t!r}"
                     for i, t in sorted(seconds.items()))


def test_the_timed_iterations_and_the_next_ones_extra_time_over_the_job_at_its_usual_pace():
    # 50 iterations of 2 s, but: start-up (1-21) and a timed last iteration (50) left out; the timed 30 and 40 take
    # 3 s, the one after 30 takes 2.5 s, after 40 the usual 2 s; 35 and 36 (a placebo pair, offset 5) 1 s more each.
    seconds = {i: 2.0 for i in range(1, 51)} | {1: 30.0, 20: 9.0, 21: 4.0, 30: 3.0, 31: 2.5, 40: 3.0, 50: 9.0,
                                                 35: 3.0, 36: 3.0}
    timed, placebos = timed_steps_cost(iteration_seconds(rcnn_logs(seconds)), [30, 40, 50])
    # Iterations 22-49 took 28 x 2 s + 1 + 0.5 + 1 (+ 2 at 35-36) against 56 s at the usual pace: 2.5 s over 56.
    assert timed == pytest.approx(2.5 / 56)
    # Offsets 2-8 after 30 and 40 (32-33, 42-43; ...; 38-39, 48-49): offset 5's pairs hold 35 and 36 (2 s more),
    # offset 4's (34-35, ...) and 6's (36-37, ...) one of them (1 s).
    assert placebos == pytest.approx([0, 0, 1 / 56, 2 / 56, 1 / 56, 0, 0])


def test_a_job_at_an_even_pace_costs_nothing_whatever_its_noise_elsewhere():
    seconds = {i: 2.0 + (0.4 if i % 7 == 0 and i % 10 not in (0, 1) else 0.0) for i in range(1, 46)}
    assert timed_steps_cost(iteration_seconds(rcnn_logs(seconds)), [30, 40])[0] == pytest.approx(0.0)


def test_the_rate_after_the_20th_iteration_is_every_image_over_every_second_the_timed_ones_included():
    seconds = {20: 4.0, 21: 20.0, 22: 10.0, 23: 5.0}  # by hand: 6 images in 35 s after the 20th
    assert timed_phase_rate(iteration_seconds(rcnn_logs(seconds))) == pytest.approx(6 / 35)


def test_mnist_steps_are_counted_over_the_epochs_as_the_trainer_counts_them():
    # 2 epochs of 3 steps at log-interval 1, batch 64 on 2 ranks: 128 samples a line; the last step of an epoch is
    # smaller but its rate is nominal (128 over its seconds). By hand: 128 / 2560 = 0.05 s, 128 / 1280 = 0.1 s.
    logs = "\n".join(f"[1,0]<stdout>:epoch={e} batch={b}/3 loss=0.5000 samples_per_sec={r}"
                     for e, b, r in [(1, 1, "2560.0"), (1, 2, "1280.0"), (1, 3, "2560.0"), (2, 1, "1280.0"),
                                     (2, 2, "2560.0"), (2, 3, "2560.0")])
    logs += "\n[1,0]<stdout>:epoch=1 train_loss=0.4 samples_per_sec=2000.0"  # an epoch's line: not a step
    assert mnist_step_seconds(logs) == pytest.approx({1: 0.05, 2: 0.1, 3: 0.05, 4: 0.1, 5: 0.05, 6: 0.05})


def test_a_timed_steps_cost_net_of_what_the_next_steps_give_back():
    # 59 steps of 1 s; each timed step (30, 40, 50) takes 1.5 s, the step 3 after it 0.8 s, the step 5 after 0.9 s:
    # 0.2 s net a cycle; the step 6 after it (36, 46, 56) 1.2 s, outside the six steps. By hand: steps 22-59 (38
    # steps), 3 cycles x 0.2 s over 38 s.
    seconds = {i: 1.0 for i in range(1, 60)} | {t + d: v for t in (30, 40, 50) for d, v in
                                                 ((0, 1.5), (3, 0.8), (5, 0.9), (6, 1.2))}
    assert six_steps_share(seconds, [30, 40, 50]) == pytest.approx(0.6 / 38)
    assert timed_steps_cost(seconds, [30, 40, 50])[0] == pytest.approx(1.5 / 38)  # the timed pairs alone: +0.5 s each


def test_timed_steps_far_apart_at_the_steps_the_report_names():
    # Steps of 0.1 s; the ranks met at 30, 40 and 190 (the samples) and 340 (the last meeting): each takes 0.15 s and
    # the step after it 0.12 s. By hand: steps 22-400 (379 steps), 4 x 0.07 s over 37.9 s; the placebo at offset 2
    # (32-33, 42-43, 192-193, 342-343) finds nothing.
    seconds = {i: 0.1 for i in range(1, 401)} | {t + d: v for t in (30, 40, 190, 340)
                                                  for d, v in ((0, 0.15), (1, 0.12))}
    report = {"samples": {"step": [30, 40, 190]}, "steps": {"last_met": 340}}
    timed = timed_steps(report)
    assert timed == [30, 40, 190, 340]
    cost, placebos = timed_steps_cost(seconds, timed)
    assert cost == pytest.approx(4 * 0.07 / 37.9)
    assert placebos[0] == pytest.approx(0.0)
    # A report written before last_met: the samples' steps only.
    assert timed_steps({"samples": {"step": [30, 40]}, "steps": {}}) == [30, 40]

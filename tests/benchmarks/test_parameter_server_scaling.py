"""The parameter-server study's arithmetic (benchmarks/parameter_server_scaling.py): the efficiency its chart draws
from a --json record (benchmarks/common/charts.py, scaling_curves) and the efficiency its table prints, from a small
record whose answers are worked out by hand below. Runs no job: the studies themselves run on a quiet machine."""

import argparse

import pytest

from benchmarks import parameter_server_scaling
from benchmarks.common import charts

# Two rounds at 2 and 4 workers. By hand, efficiency = throughput / (N x one worker alone):
#   2 workers: alone 100, 120 (median 110); Horovod 150, 210 (median 180): 180 / (2 x 110) = 9/11; the rounds
#              150 / (2 x 100) = 0.75, 210 / (2 x 120) = 0.875. The control 220, 264 (median 242): 242 / 220 = 1.1.
#   4 workers: alone 50, 50; Horovod 180, 220 (median 200): 200 / (4 x 50) = 1.0; the rounds 0.9, 1.1.
# "ps 2:1" has no 4-worker rounds: no curve for it.
RECORD = {"models": ["mnist"], "workers": [2, 4],
          "rates": {"mnist": {"2": {"alone": [100.0, 120.0], "horovod": [150.0, 210.0], "ps 2:1": [100.0, 100.0],
                                    "control": [220.0, 264.0]},
                              "4": {"alone": [50.0, 50.0], "horovod": [180.0, 220.0], "ps 2:1": [],
                                    "control": [200.0, 200.0]}}}}


def test_the_chart_draws_throughput_over_n_times_one_worker_alone():
    curves = charts.scaling_curves(RECORD)
    assert list(curves) == ["mnist"] and list(curves["mnist"]) == ["horovod", "control"]
    (two, median_2, rounds_2), (four, median_4, rounds_4) = curves["mnist"]["horovod"]
    assert (two, four) == (2, 4)
    assert median_2 == pytest.approx(9 / 11) and rounds_2 == pytest.approx([0.75, 0.875])
    assert median_4 == pytest.approx(1.0) and rounds_4 == pytest.approx([0.9, 1.1])
    assert [median for _, median, _ in curves["mnist"]["control"]] == pytest.approx([1.1, 1.0])


def test_a_model_without_rounds_has_no_panel():
    assert charts.scaling_curves({**RECORD, "models": ["mnist", "faster_rcnn"]}).keys() == {"mnist"}


def test_the_table_prints_the_same_efficiency(capsys):
    rates = {("mnist", int(workers), layout): rounds
             for workers, layouts in RECORD["rates"]["mnist"].items() for layout, rounds in layouts.items()}
    for workers in (2, 4):  # the table has every layout
        for layout in parameter_server_scaling.LAYOUTS:
            rates[("mnist", workers, layout)] = rates.get(("mnist", workers, layout)) or [100.0]
    args = argparse.Namespace(image="test", repeat=2, epochs=3, train=6000, iterations=4, short=192,
                              models=["mnist"], workers=[2, 4])
    parameter_server_scaling.report(rates, {}, args)
    rows = {tuple(line.split()[1:3]): line.split()[3:] for line in capsys.readouterr().out.splitlines()
            if line.startswith("mnist ")}
    # throughput, vs N x alone, vs control (Horovod's 180 against the control's 242: 0.74)
    assert rows[("2", "horovod")] == ["180.000", "0.82", "0.74"]
    assert rows[("4", "horovod")] == ["200.000", "1.00", "1.00"]
    assert rows[("2", "alone")] == ["110.000", "-", "-"]

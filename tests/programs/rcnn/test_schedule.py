"""schedule: warmup over global iterations and step decay by epoch."""

import pytest
from mxnet_programs.rcnn.schedule import learning_rate


def lr_at(epoch, iteration, steps, decay_epochs=(2, 3), warmup=10):
    return learning_rate(0.01, epoch, iteration, steps, decay_epochs, decay=0.1, warmup=warmup,
                         warmup_factor=1.0 / 3.0)


def test_learning_rate_warmup_and_decay():
    assert lr_at(0, 0, 100) == pytest.approx(0.01 / 3)
    assert lr_at(0, 5, 100) == pytest.approx(0.01 * (1 / 3 * 0.5 + 0.5))
    assert lr_at(0, 10, 100) == pytest.approx(0.01)
    assert lr_at(1, 0, 100) == pytest.approx(0.01)
    assert lr_at(2, 0, 100) == pytest.approx(0.001)
    assert lr_at(3, 50, 100) == pytest.approx(0.0001)
    # warmup counts global iterations: epoch 1 iteration 2 of 4-iteration epochs = iteration 6
    assert lr_at(1, 2, 4) == pytest.approx(0.01 * (1 / 3 * 0.4 + 0.6))
    assert lr_at(0, 0, 4, warmup=0) == pytest.approx(0.01)

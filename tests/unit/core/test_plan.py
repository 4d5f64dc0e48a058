"""core/plan.py: the plan's parts are data; what little they compute: a /dev/shm budget is short only where there is
a /dev/shm smaller than the need."""

from sagemaker_mxnet_horovod.core.plan import ShmBudget

MIB = 1 << 20


def test_a_budget_is_short_only_where_a_dev_shm_is_smaller_than_the_need():
    assert ShmBudget(64 * MIB, 65 * MIB, ()).short
    assert not ShmBudget(64 * MIB, 64 * MIB, ()).short
    assert not ShmBudget(None, 65 * MIB, ()).short  # no /dev/shm here: nothing to compare

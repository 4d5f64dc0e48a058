"""data: every rank's batches of an epoch, and its validation shard."""

import pytest
from mxnet_programs.rcnn import data, inputs
from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER

from programs.rcnn.test_inputs import TWO_BY_TWO, _args, _config

np = pytest.importorskip("numpy", reason="needs numpy: run inside the image (make image-tests)")


def test_epoch_batches_are_disjoint_equal_and_deterministic():
    ratios = np.linspace(0.5, 2.0, 23)
    steps = data.steps_per_epoch(23, 3, 2)
    assert steps == 3
    shards = [data.epoch_batches(np, 23, ratios, 5, 1, r, 3, 2, steps) for r in range(3)]
    seen = [i for shard in shards for batch in shard for i in batch]
    assert all(len(shard) == steps and all(len(b) == 2 for b in shard) for shard in shards)
    assert len(seen) == len(set(seen)) == 18
    assert shards[0] == data.epoch_batches(np, 23, ratios, 5, 1, 0, 3, 2, steps)
    assert shards[0] != data.epoch_batches(np, 23, ratios, 5, 2, 0, 3, 2, steps)
    assert data.steps_per_epoch(23, 3, 2, cap=2) == 2
    assert data.steps_per_epoch(3, 2, 2) == 0


def test_val_shards_cover_everything_once():
    for n in (0, 1, 2, 5, 9):
        for size in (1, 2, 3):
            shards = [data.val_shard(n, r, size) for r in range(size)]
            assert [i for s, e in shards for i in range(s, e)] == list(range(n))


def test_two_ranks_of_a_host_train_on_disjoint_halves_of_its_sharded_part(coco):
    train, val = inputs.load_inputs(FASTER, _args(coco))
    shards = [inputs.train_shard(_args(coco), env, None, _config(train="ShardedByS3Key")) for env in TWO_BY_TWO[:2]]
    ratios = [1.0] * train.num_images
    steps = data.steps_per_epoch(train.num_images, shards[0].count, 1)
    assert steps == 4
    per_rank = [{i for batch in data.epoch_batches(np, train.num_images, ratios, 233, 0, s.index, s.count, 1, steps)
                 for i in batch} for s in shards]
    assert per_rank[0].isdisjoint(per_rank[1]) and per_rank[0] | per_rank[1] == set(range(8))



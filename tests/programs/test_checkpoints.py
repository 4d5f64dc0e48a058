"""checkpoints: numbered checkpoints, ordering, pruning, and the newest complete one."""

import os

from mxnet_programs.checkpoints import CheckpointManager


def _writer(text):
    def save(filename):
        with open(filename, "w") as f:
            f.write(text)
    return save


def test_checkpoints_order_prune_and_latest(tmp_path):
    manager = CheckpointManager(str(tmp_path), keep=2)
    assert manager.latest() == (None, None)
    manager.save(1, {"v": 1}, {"params": _writer("e1")})
    manager.save(2, {"v": 2}, {"params": _writer("e2")}, batch=17)  # stopped inside epoch 2
    state, stem = manager.latest()
    assert (state["epoch"], state["batch"], state["v"]) == (2, 17, 2)
    assert stem.endswith("checkpoint-epoch-0002-batch-000017")
    manager.save(2, {"v": 3}, {"params": _writer("e2 done")})  # epoch 2 complete: newer than its partial one
    state, stem = manager.latest()
    assert (state["epoch"], state["batch"]) == (2, None)
    assert sorted(os.listdir(tmp_path)) == [  # epoch 1 pruned, newest two kept
        "checkpoint-epoch-0002-batch-000017.json", "checkpoint-epoch-0002-batch-000017.params",
        "checkpoint-epoch-0002.json", "checkpoint-epoch-0002.params"]


def test_checkpoint_without_its_files_is_skipped(tmp_path):
    manager = CheckpointManager(str(tmp_path), keep=5)
    manager.save(1, {}, {"params": _writer("e1")})
    manager.save(2, {}, {"params": _writer("e2")})
    os.remove(tmp_path / "checkpoint-epoch-0002.params")  # e.g. a partial S3 sync
    (tmp_path / "checkpoint-epoch-0003.json").write_text("{truncated")
    state, _ = manager.latest()
    assert state["epoch"] == 1


def test_states_are_the_retained_checkpoints_oldest_first(tmp_path):
    manager = CheckpointManager(str(tmp_path), keep=2)
    for epoch, best in ((1, 0), (2, 0), (3, 2)):
        manager.save(epoch, {"best_epoch": best}, {"params": _writer(f"e{epoch}")})
    (tmp_path / "checkpoint-epoch-0004.json").write_text("{truncated")
    assert [(s["epoch"], s["best_epoch"]) for s in manager.states()] == [(2, 0), (3, 2)]

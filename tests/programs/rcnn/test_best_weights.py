"""best_weights: the best epoch's weights beside the checkpoints, for a restarted job. A network here is anything with
save_parameters(filename); the whole program's restart (a new, empty model directory, the best epoch's network
exported from the copy) is test_training.py's test_one_process_trains_validates_and_resumes."""

from mxnet_programs.rcnn.best_weights import BestCopies


class Weights:
    """save_parameters as a network's: writes its bytes to the file it is given."""

    def __init__(self, content: bytes):
        self.content = content

    def save_parameters(self, filename):
        with open(filename, "wb") as file:
            file.write(self.content)


def test_a_copy_is_named_by_the_epochs_done_like_a_checkpoint(tmp_path):
    copies = BestCopies(str(tmp_path), "faster_rcnn_resnet50_v1b_coco")
    copies.keep(Weights(b"epoch 0"), 0)
    copies.keep(Weights(b"epoch 11"), 11)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == {
        "faster_rcnn_resnet50_v1b_coco-best-epoch-0001.params": b"epoch 0",
        "faster_rcnn_resnet50_v1b_coco-best-epoch-0012.params": b"epoch 11"}


def test_prune_keeps_the_epochs_in_use_and_every_other_file(tmp_path):
    copies = BestCopies(str(tmp_path), "net")
    for epoch in (0, 2, 5):
        copies.keep(Weights(b"w"), epoch)
    others = ["net-epoch-0003.params", "net-epoch-0003.json", "other-best-epoch-0001.params", "net-best.params"]
    for name in others:
        (tmp_path / name).write_text("x")
    copies.prune({2, None})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*others, "net-best-epoch-0003.params"])
    BestCopies(str(tmp_path / "absent"), "net").prune(set())  # no checkpoint directory yet: nothing to do


def test_restore_puts_the_copy_in_the_model_directory_over_what_is_there(tmp_path):
    copies = BestCopies(str(tmp_path / "checkpoints"), "net")
    copies.keep(Weights(b"epoch 3"), 3)
    model_path = tmp_path / "model" / "net-best.params"
    assert copies.restore(str(model_path), 3)
    assert model_path.read_bytes() == b"epoch 3"
    model_path.write_bytes(b"a later best, not the checkpoint's")
    assert copies.restore(str(model_path), 3) and model_path.read_bytes() == b"epoch 3"


def test_restore_without_a_copy_says_whether_the_model_directory_still_holds_the_best(tmp_path):
    copies = BestCopies(str(tmp_path / "checkpoints"), "net")
    model_path = tmp_path / "net-best.params"
    assert not copies.restore(str(model_path), 0)  # a restart before this change kept no copy: the caller says so
    model_path.write_bytes(b"left by the run that stopped")
    assert copies.restore(str(model_path), 0) and model_path.read_bytes() == b"left by the run that stopped"

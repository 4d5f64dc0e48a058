"""metrics: the k=v line format, quoted values, and TensorBoard's no-op when disabled."""

from mxnet_programs.metrics import TensorBoardWriter, format_metrics, quoted


def test_format_metrics():
    line = format_metrics([("epoch", 3), ("train_loss", 0.123456), ("samples_per_sec", 1234.56),
                               ("time_sec", 2.0), ("batch", "4/10")])
    assert line == "epoch=3 train_loss=0.1235 samples_per_sec=1234.6 time_sec=2.00 batch=4/10"


def test_a_quoted_value_keeps_its_spaces_and_letters_in_one_field():
    line = format_metrics([("epoch", 0), ("class", quoted('big "ship" ä=1')), ("val_bbox_ap", 0.5)])
    assert line == 'epoch=0 class="big \\"ship\\" ä=1" val_bbox_ap=0.5000'


def test_tensorboard_writer_disabled_is_a_no_op(tmp_path):
    writer = TensorBoardWriter(str(tmp_path / "tb"), enabled=False)
    writer.scalars(1, {"a": 1.0})
    writer.close()
    assert not writer.active and not (tmp_path / "tb").exists()

"""metrics: the k=v line format and TensorBoard's no-op when disabled."""

from mxnet_programs.metrics import TensorBoardWriter, format_metrics


def test_format_metrics():
    line = format_metrics([("epoch", 3), ("train_loss", 0.123456), ("samples_per_sec", 1234.56),
                               ("time_sec", 2.0), ("batch", "4/10")])
    assert line == "epoch=3 train_loss=0.1235 samples_per_sec=1234.6 time_sec=2.00 batch=4/10"


def test_tensorboard_writer_disabled_is_a_no_op(tmp_path):
    writer = TensorBoardWriter(str(tmp_path / "tb"), enabled=False)
    writer.scalars(1, {"a": 1.0})
    writer.close()
    assert not writer.active and not (tmp_path / "tb").exists()

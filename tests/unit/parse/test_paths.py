"""paths.py: SageMaker's directories under /opt/ml, as the toolkit names them, under any root (tests)."""

from pathlib import Path

from sagemaker_mxnet_horovod.parse.paths import Paths


def test_sagemakers_directories_under_opt_ml():
    paths = Paths(Path("/opt/ml"))
    assert [str(p) for p in (paths.config_dir, paths.input_dir, paths.data_dir, paths.model_dir, paths.output_dir,
                             paths.output_data_dir, paths.output_intermediate_dir, paths.failure_file,
                             paths.code_dir, paths.checkpoint_dir)] == [
        "/opt/ml/input/config", "/opt/ml/input", "/opt/ml/input/data", "/opt/ml/model", "/opt/ml/output",
        "/opt/ml/output/data", "/opt/ml/output/intermediate", "/opt/ml/output/failure", "/opt/ml/code",
        "/opt/ml/checkpoints"]


def test_another_root_moves_every_directory(tmp_path):
    paths = Paths(tmp_path)
    assert paths.failure_file == tmp_path / "output" / "failure" and paths.code_dir == tmp_path / "code"


def test_local_paths_move_checkpoints_and_tensorboard_only():
    paths = Paths(Path("/opt/ml"))
    assert str(paths.tensorboard_dir) == "/opt/ml/output/tensorboard"
    moved = Paths(Path("/opt/ml"), checkpoint_local_path=Path("/ckpt"), tensorboard_local_path=Path("/tb"))
    assert (str(moved.checkpoint_dir), str(moved.tensorboard_dir)) == ("/ckpt", "/tb")
    assert moved.model_dir == paths.model_dir and moved.output_dir == paths.output_dir

"""training.py with a SageMaker Debugger hook configuration: Faster and Mask R-CNN save their losses (each loss block),
weights and gradients, read back with smdebug's trial API. One process each."""

import pytest

from programs.rcnn import helpers as rcnn
from programs.test_debugger import WEIGHTS_AND_LOSSES, hook_env

pytest.importorskip("smdebug", reason="needs smdebug: run inside the image (make image-tests)")
from smdebug.core.modes import ModeKeys  # noqa: E402
from smdebug.trials import create_trial  # noqa: E402


@pytest.mark.parametrize("model", ["faster", "mask"])
def test_rcnn_saves_its_losses_and_weights(coco, tmp_path, model):
    env = {**rcnn.channel_env(coco), **hook_env(tmp_path, WEIGHTS_AND_LOSSES)}
    job = rcnn.run(model, tmp_path / "job", [*rcnn.TINY_ARGS, "--epochs", "1", "--max-iterations-per-epoch", "2",
                                             "--val-interval", "2"], env=env)
    assert job.returncode == 0, job.explain()
    trial = create_trial(str(tmp_path / "tensors"))
    names = trial.tensor_names()
    losses = [name for name in names if name.endswith("_output_0") and "loss" in name]
    # RPN and R-CNN classification and box losses (and the mask loss for Mask R-CNN).
    assert len(losses) == (5 if model == "mask" else 4), names
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1]
    assert any(name.startswith("gradient/") for name in names) and any(name.endswith("_weight") for name in names)

"""training.py with a SageMaker Debugger hook configuration: Faster and Mask R-CNN save their losses (each loss block),
weights and gradients, read back with smdebug's trial API. One process each: conftest.py's first_epoch, the run
test_training.py's one-process test also reads."""

import pytest

pytest.importorskip("smdebug", reason="needs smdebug: run inside the image (make image-tests)")
from smdebug.core.modes import ModeKeys  # noqa: E402
from smdebug.trials import create_trial  # noqa: E402


@pytest.mark.parametrize("model", ["faster", "mask"])
def test_rcnn_saves_its_losses_and_weights(first_epoch, model):
    job = first_epoch(model)  # 2 iterations with a hook saving weights, gradients and losses every step (conftest.py)
    assert job.returncode == 0, job.explain()
    trial = create_trial(str(job.workdir.parent / "debugger" / "tensors"))
    names = trial.tensor_names()
    losses = [name for name in names if name.endswith("_output_0") and "loss" in name]
    # RPN and R-CNN classification and box losses (and the mask loss for Mask R-CNN).
    assert len(losses) == (5 if model == "mask" else 4), names
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1]
    assert any(name.startswith("gradient/") for name in names) and any(name.endswith("_weight") for name in names)

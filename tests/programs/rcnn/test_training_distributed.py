"""training (the R-CNN programs) across ranks: 2 ranks x 1 image train as 1 rank x the same 2 images (one big batch);
and in that first step every loss term trains its part of the network (every trainable weight moves by its gradient,
not by weight decay alone); every rank's optimizer updates with the documented learning rate at every step. That both
layouts learn on one batch: test_training_learns.py.

Each model trains the two layouts once, from the same weights, through its own main (recorded_run.py: rank 0 records
the trainable weights around the first step; the models' random draws pinned per image, so that an image's draws do
not depend on its rank or batch). The images: two of 192 x 192 px (nothing resized or padded; the C4 models' RPN
needs 2000 anchors), one object each (GluonCV pads a batch's boxes to its most, and its sampler's sort, not stable,
then picks other RoIs), whose positive RoIs differ in number (13 and 7: the mask loss's normalisation must not weigh
them). One thread per rank in both layouts: with two, the convolutions add in another order, and a 1e-7 change in an
RPN score reorders the proposals.

Time: an iteration of these ResNet-50 C4 models is about 10 s per image on one core at the model zoo's settings (the
RCNN head runs ResNet's last stage on 128 RoIs), so the runs are one iteration long, a model's two layouts run side
by side, and the RCNN head samples fewer RoIs per image (FIRST_STEP_MODEL, GluonCV's constructor arguments through
recorded_run.py): Faster R-CNN 8, at most half positive; Mask R-CNN 32, at most 16 positive, so that the two images
keep their 13 and 7. The RPN keeps the model zoo's settings: at 128 px with helpers.SMALL_MODEL (every anchor a
proposal) the two layouts' first steps differed by up to 0.24 (backbone weights; seed 14), so the images stay 192 px.
"""

import json

import pytest
from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK
from sagemaker_mxnet_data import synthetic_coco

from programs.helpers import first_step_differences, recorded_first_step
from programs.rcnn import helpers as h

pytestmark = [pytest.mark.slow, pytest.mark.mpi, pytest.mark.usefixtures("needs_horovod")]

MODELS = {"faster": FASTER, "mask": MASK}
ITERATIONS = 1  # the one step compared; the two images are the one batch
LR = 0.16  # for a global batch of 8 images: 0.04 for these 2
WARMUP = 2
# GluonCV's constructor arguments for the RCNN head's sampler (the model zoo's: 128 RoIs per image, a quarter positive).
FIRST_STEP_MODEL = {"faster": {"num_sample": 8, "pos_ratio": 0.5}, "mask": {"num_sample": 32, "pos_ratio": 0.5}}
# As in test_mnist_mpi.py. Measured with FIRST_STEP_MODEL on the data seeds whose two images have one object each (14,
# 18, 21): below 1.4e-5 (below 5e-5 with the model zoo's 128 RoIs). Broken, each in a copy: the data split ignoring the
# rank (every rank the first image) 1.43 (Faster; the box predictor); GluonCV's one mask normaliser for a device's
# images 5.84 (Mask; the mask head's last bias), as 5.8 with 128 RoIs: the images' positives still differ.
SAME_STEP = 1e-3
WD = 1e-4  # the programs' default
# Of a weight's first-step change, the part that is not weight decay's (lr x wd x weight; biases have none): at least
# GRADIENT_SHARE. Measured 0.9997 or more for every trainable weight of both models with FIRST_STEP_MODEL, seeds 14,
# 18 and 21 (1.00 with the model zoo's 128 RoIs; decay is at most 2% of a change); with rcnn_box's loss cut from the
# graph (rcnn_box.sum().detach() in train_step.py, in a copy) the box predictor's weight 0.02 and its bias 0 (unchanged;
# both models, as with 128 RoIs), while test_training_learns.py, which cannot assert rcnn_box, still passes.
GRADIENT_SHARE = 0.5


@pytest.fixture(scope="module")
def two_images(tmp_path_factory, needs_mxnet):
    out = tmp_path_factory.mktemp("two") / "coco"
    synthetic_coco.write_coco(out, num_train=2, num_val=0, image_size=(192, 192), seed=14)
    return out


@pytest.fixture(scope="module", params=list(MODELS))
def layouts(request, two_images, module_tmp):
    """(model, 1 rank x 2 images, 2 ranks x 1 image), finished."""
    model = request.param
    args = ["--short", "192", "--max-size", "192", "--lr", str(LR), "--lr-warmup", str(WARMUP),
            "--epochs", str(ITERATIONS), "--wd", str(WD)]
    return model, *h.train_both_layouts(model, module_tmp(model), two_images, args, 900,
                                        **FIRST_STEP_MODEL[model])


def iterations(job, model):
    """Each iteration's total loss and terms ({name: value}) and lr, as rank 0 logged them."""
    return h.first_iterations(job, MODELS[model].loss_names)


def test_two_ranks_of_one_image_take_the_step_one_rank_of_two_takes(layouts):
    """From the same weights, each rank's image (the data split), Horovod's average of the ranks' gradients, each
    rank's rescaling by its batch and the learning rate for the global batch (lr x 2 / 8, warmed up from a third,
    docs/programs.md) must change every trainable weight as one rank's step on both images does."""
    model, one, two = layouts
    for job, ranks, per_rank in ((one, 1, 2), (two, 2, 1)):
        assert job.returncode == 0, job.explain()
        assert f"world_size={ranks} devices_per_rank=1 context=cpu(0) batch_per_device={per_rank} global_batch=2 " \
               f"base_lr={LR:g}/8img effective_lr={LR * 2 / 8:g} " in job.stdout, job.stdout
        assert iterations(job, model)[0][1] == pytest.approx(LR * 2 / 8 / 3, rel=1e-5)
    same_start, differences, changed = first_step_differences(one.model_dir, two.model_dir)
    assert same_start and changed
    assert max(differences.values()) < SAME_STEP, sorted(differences.items(), key=lambda item: -item[1])[:5]


def test_every_trainable_weight_takes_its_gradient_in_the_first_step(layouts):
    """Each loss term must reach what it trains: a head whose loss is cut from the graph still moves, by weight decay
    alone (a bias not at all), and the loss that is not asserted to fall (rcnn_box, test_training_learns.py) would
    train nothing unseen. GluonCV's anchors are constants among the trainable parameters: not weights."""
    import numpy as np

    model, one, _ = layouts
    assert one.returncode == 0, one.explain()
    lr = iterations(one, model)[0][1]
    start, after = recorded_first_step(one.model_dir)
    shares = {}
    for name in start.files:
        if name.endswith("_anchor_"):
            continue
        change = after[name] - start[name]
        decay = 0 if name.endswith("_bias") else -lr * WD * start[name]
        size = np.linalg.norm(change)
        shares[name] = float(np.linalg.norm(change - decay) / size) if size else 0.0
    weak = {name: round(share, 3) for name, share in shares.items() if share < GRADIENT_SHARE}
    assert len(shares) > 40 and not weak, f"moved by weight decay alone, or not at all: {weak}"


# The learning-rate run: 4 epochs of 2 iterations (4 images at h.SMALL px, a global batch of 2), the warmup 3 iterations
# long, so that it spans an epoch's boundary and a rate set once an epoch would differ within an epoch; with the cheap
# model of test_finetune.py (h.SMALL_MODEL: 8 RoIs sampled per image): the rule is the programs' one, shared by both
# models.
LR_ARGS = ["--short", str(h.SMALL), "--max-size", str(h.SMALL), "--lr", "0.16", "--lr-warmup", "3",
           "--lr-warmup-factor", "0.25", "--lr-decay-epoch", "2,3", "--lr-decay", "0.1", "--epochs", "4"]
# By hand from the documented rule (docs/programs.md): lr x global batch / 8 = 0.16 x 2 / 8 = 0.04; over the first 3
# global iterations g warmed up from 0.25 x it (0.25 x (1 - g/3) + g/3: x 0.25, 0.5, 0.75); x 0.1 from epoch 2, again
# from epoch 3. Two iterations an epoch: step k is epoch k // 2, iteration k % 2.
EXPECTED_LR = [0.01, 0.02,  # epoch 0: the warmup's start, its second step
               0.03, 0.04,  # epoch 1: its last step, then the warmup's end
               0.004, 0.004,  # epoch 2: after the first decay epoch
               0.0004, 0.0004]  # epoch 3: after the second


@pytest.fixture(scope="module")
def four_images(tmp_path_factory, needs_mxnet):
    out = tmp_path_factory.mktemp("four") / "coco"
    synthetic_coco.write_coco(out, num_train=4, num_val=0, image_size=(h.SMALL, h.SMALL), seed=14)
    return out


@pytest.fixture(scope="module")
def lr_layouts(four_images, module_tmp):
    return h.train_both_layouts("faster", module_tmp("lr"), four_images, LR_ARGS, 900, **h.SMALL_MODEL)


def test_every_rank_updates_with_the_documented_learning_rate_at_every_step(lr_layouts):
    """What the optimizer used for each weight's update in each step (recorded_run.py wraps its update's lr lookup on
    every rank), not the schedule's output nor the log: each step of a warmup across an epoch's boundary, the warmup's
    end, each step after each decay epoch, for 1 rank x 2 images and 2 ranks x 1 image."""
    one, two = lr_layouts
    for job, ranks in ((one, 1), (two, 2)):
        assert job.returncode == 0, job.explain()
        for rank in range(ranks):
            used = json.loads((job.model_dir / f"optimizer-lr-rank-{rank}.json").read_text())
            assert len(used) == len(EXPECTED_LR), used
            for step, (rates, expected) in enumerate(zip(used, EXPECTED_LR)):
                assert len(rates) == 1 and rates[0] == pytest.approx(expected, rel=1e-6), \
                    f"{ranks} ranks, rank {rank}, step {step}: the optimizer used {rates}, the rule gives {expected}"

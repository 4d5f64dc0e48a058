"""training (the R-CNN programs learn): overfitting one small synthetic batch for 30 iterations lowers the loss terms
the program logs, for Faster and Mask R-CNN, on 1 rank x 2 images and on 2 ranks x 1 image: the total, rpn_cls,
rpn_box and rcnn_cls fall by stated factors, and Mask R-CNN's mask ends a stated margin below chance, which its head's
learning reaches and the other terms' training alone does not; rcnn_box is not asserted (below).

The batch: two 128 x 128 px images, one object each; each iteration is its own epoch. The programs run through their
own main (recorded_run.py: the models' random draws pinned per image, so that a run is deterministic: the same
settings log the same numbers on this machine; the spread below is over the programs' --seed, the weights' init).
Cheap iterations on the programs' code path, from GluonCV's own constructor arguments (MODEL_ARGUMENTS, given by
recorded_run.py): 8 RoIs per image for the RCNN head instead of 128 (the head runs ResNet's last stage on each: most
of the ~10 s an image took), at most half of them positive (GluonCV's quarter would leave 2); every anchor of the
image (960 at 128 px) a proposal, without NMS, instead of 2000 after NMS 0.7: with the model zoo's NMS, 300
proposals and 2 positives of 8, rpn_box rose again after iteration 20 and ended at 0.4x and 0.95x of its first
value in the two layouts of Faster R-CNN (lr decayed at 18 and 25). One thread per rank, a model's two layouts side
by side: about 1.5 s an iteration, 70 s for Faster R-CNN's two runs, 80 s for Mask R-CNN's, on 2 cores.

The learning rate: --lr 0.16 (0.04 for the 2 images; at that rate rcnn_cls already jumps to up to 1.7x its first
value in some of the first 12 iterations; higher rates were not tried), warmed up over 2 iterations, 10x lower from
iteration 20. After about iteration 20 the RPN terms creep up again while the RCNN terms still fall (the heads share
the backbone's features): over 40 iterations rpn_box ended 1.0x to 2.9x below its first value.

The mask term: its fall (1.4x to 2.3x, first iteration over the mean of the last 5) is no evidence: it falls about
as much with its head's gradient stopped (mask_loss.sum().detach() in mask_rcnn.py, in a copy: seed 233, 1.43x and
1.43x against 1.81x and 1.77x learning; seed 1, 1.23x and 1.22x against 1.46x and 1.43x; seed 2, 1.81x and 1.83x
against 2.25x and 2.12x), because a fixed random head starts above chance (0.85 to 1.28 per image) and the other
terms' training brings what it scores to chance, log 2 = 0.69 per image, and no further. Its level is evidence:
learning, it ends 0.09 to 0.14 below chance (MASK_BELOW_CHANCE); stopped, at or above chance. Learning reaches no
further in 50 iterations (seed 1: 0.579 and 0.573 per image, against 0.583 and 0.598 at 30); at --lr 0.04 it reached
0.477 and 0.471 (seed 233, Mask R-CNN, one run: a lower rate for both models would need every factor measured
again).

rcnn_box is not asserted: it does not fall (0.75x to 1.19x in the 12 runs measured for FALLS), and it cannot from a
random backbone in this budget. Printed per positive RoI (in a copy; seed 233, Faster R-CNN, 30 iterations): the box
head predicts the same offsets for every positive of an iteration (their standard deviation across them, averaged
over the last 10 iterations: 0.015 and 0.063, against the targets' 1.18 and 0.97), and on the same RoIs it scores
what predicting no offset scores, within 1% (per positive, last 10 iterations, 2.59 against 2.60 and 2.20 against
2.22, 1 x 2 then 2 x 1); so does the FPN variant's head (--use-fpn true), which sees the RoI's 7 x 7 layout (2.40
against 2.41, 2.06 against 2.04; deviations 0.032 and 0.035 against 1.21 and 1.05). The pooled features of
overlapping RoIs of an untrained ResNet differ too little for the head to tell them apart in a few dozen iterations:
it can learn what an image's positives share, and their targets' mean is near 0 (the best constant per image lowers
the term by 4%). Its step is also too large for the features' common part: at --lr 0.16 it spikes in the first
iterations (to 4.9 to 17.9 as logged, seeds 233, 1, 2) and returns to the untrained level; the figures above are
with the box predictor's rate scaled by 0.05 (lr_mult, in a copy), which stops the spikes. What the logged term does
then (1.37x, 1.10x, 1.26x at scales 0.2, 0.05, 0.01, 1 x 2; 0.99x, 1.21x, 1.35x, 2 x 1) is its RoIs' doing, as when
its gradient is stopped (seed 233 at --lr 0.16: ends 2.52 and 1.21 against 2.37 and 1.20 learning): the proposals
draw nearer their objects as the RPN learns. Also tried, none falling: --lr 0.04 and 0.01, 50 iterations, 16 RoIs
per image with every positive taken, resnet18_v1b (Mask R-CNN only; diverged at --lr 0.16). Given more iterations
the head starts to tell RoIs apart as the backbone trains, slowly: over 150 (seed 233, the rate scaled by 0.05, 10x
lower from 120; 347 s for the two layouts) its score on its RoIs against no offset's went from 0.99 to 1.00 (the
first 30 iterations, 1 x 2) to 0.88 (the last 15), the logged term from 2.65 to 1.76 mostly with the RoIs; over 90
at the full rate or scaled by 0.2, the last 10 iterations 0.89 and 0.83 (1 x 2) but 0.95 and 0.97 (2 x 1). Too
little, too noisy and too slow to assert here. GluonCV's box head regresses from a pretrained backbone, a download
not to be had here. That the term trains its head is asserted instead in test_training_distributed.py: the first
step moves the box predictor by its gradient (cut from the graph, it moves by weight decay alone, and this module
still passes).
"""

import math

import pytest
from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK
from sagemaker_mxnet_data import synthetic_coco

from programs.rcnn import helpers as h

pytestmark = [pytest.mark.slow, pytest.mark.mpi, pytest.mark.usefixtures("needs_horovod")]

MODELS = {"faster": FASTER, "mask": MASK}
SIZE = 128
# GluonCV's constructor arguments instead of the model zoo's: 8 RoIs per image, at most 4 positive; every anchor a
# proposal (pre and post NMS), an NMS that suppresses nothing.
MODEL_ARGUMENTS = {"num_sample": 8, "pos_ratio": 0.5, "rpn_train_pre_nms": 960, "rpn_train_post_nms": 960,
                   "rpn_nms_thresh": 1.0}
ITERATIONS, LAST = 30, 5
LR, WARMUP, DECAY_AT = 0.16, 2, 20
# The first iteration's value over the mean of the last LAST, at least: about 0.8 of the lowest of 3 runs of each
# model and layout (the program's --seed 233, the default and this test's, then 1 and 2), measured as
#   Faster 1 x 2 | Faster 2 x 1 | Mask 1 x 2 | Mask 2 x 1, each for seeds 233, 1, 2:
#   loss      2.53 2.10 1.74 | 3.37 3.16 2.18 | 2.07 2.51 2.63 | 2.11 2.13 1.69
#   rpn_cls   6.24 2.59 2.34 | 7.98 8.59 2.11 | 5.13 5.44 5.89 | 4.59 2.16 1.92
#   rpn_box   2.82 2.45 2.06 | 2.09 1.66 1.85 | 3.09 2.12 2.47 | 2.71 1.53 1.41
#   rcnn_cls  4.29 2.98 2.18 | 6.35 6.59 4.69 | 2.84 4.93 4.19 | 2.85 3.32 2.18
#   mask                                      | 1.81 1.46 2.25 | 1.77 1.43 2.12   (no evidence: MASK_BELOW_CHANCE)
#   rcnn_box  1.02 0.90 1.01 | 1.19 0.87 0.79 | 1.03 0.92 1.05 | 1.01 0.99 0.75   (not asserted)
FALLS = {"loss": 1.35, "rpn_cls": 1.5, "rpn_box": 1.15, "rcnn_cls": 1.75}
# Mask R-CNN's mask term, per image (the logged value over the images a rank trains: the 1-rank job logs the sum of its
# 2 images' terms, each normalised per image; the 2-rank job the mean over ranks), mean of the last LAST: at least
# MASK_BELOW_CHANCE below chance, log 2 (what a head that predicts 0.5 for every pixel scores). About 0.8 of the least
# of 3 runs, measured as chance minus the level, for seeds 233, 1, 2:
#   learning                    1 x 2:  0.137  0.110  0.125 | 2 x 1:  0.124  0.095  0.091   (levels 0.556-0.603)
#   its head's gradient stopped 1 x 2: -0.013 -0.002 -0.015 | 2 x 1: -0.010 -0.006 -0.007   (levels 0.695-0.708)
# (stopped: mask_loss.sum().detach() in mask_rcnn.py, in a copy; this test then fails on the mask alone.)
CHANCE = math.log(2)
MASK_BELOW_CHANCE = 0.07


@pytest.fixture(scope="module")
def batch(tmp_path_factory, needs_mxnet):
    out = tmp_path_factory.mktemp("batch") / "coco"
    synthetic_coco.write_coco(out, num_train=2, num_val=0, image_size=(SIZE, SIZE), seed=14)
    return out


@pytest.fixture(scope="module", params=list(MODELS))
def layouts(request, batch, module_tmp):
    """(model, 1 rank x 2 images, 2 ranks x 1 image), finished."""
    model = request.param
    args = ["--short", str(SIZE), "--max-size", str(SIZE), "--lr", str(LR), "--lr-warmup", str(WARMUP),
            "--lr-decay-epoch", str(DECAY_AT), "--epochs", str(ITERATIONS)]
    return model, *h.train_both_layouts(model, module_tmp(model), batch, args, 600, **MODEL_ARGUMENTS)


@pytest.mark.parametrize("layout", [1, 2], ids=["1 rank x 2 images", "2 ranks x 1 image"])
def test_overfitting_one_batch_lowers_the_loss_terms(layouts, layout):
    model, job = layouts[0], layouts[layout]
    assert job.returncode == 0, job.explain()
    losses = [values for values, _ in h.first_iterations(job, MODELS[model].loss_names)]
    assert len(losses) == ITERATIONS, job.stdout
    first, last = losses[0], losses[-LAST:]
    fallen = {name: first[name] / (sum(values[name] for values in last) / LAST) for name in first}
    print(f"{model}, {['1 rank x 2 images', '2 ranks x 1 image'][layout - 1]}: first iteration / last {LAST}: "
          + " ".join(f"{name}={ratio:.2f}" for name, ratio in fallen.items()))
    short = {name: round(fallen[name], 2) for name, factor in FALLS.items() if fallen[name] < factor}
    problems = [f"fell less than {FALLS}: {short}"] if short else []
    if "mask" in first:
        below = CHANCE - sum(values["mask"] for values in last) / LAST / (2 // layout)
        print(f"mask per image, last {LAST}: {CHANCE - below:.3f}, {below:.3f} below chance")
        if below < MASK_BELOW_CHANCE:
            problems.append(f"mask per image ended {below:.3f} below chance, not {MASK_BELOW_CHANCE}: its head did not "
                            "learn")
    assert not problems, f"{'; '.join(problems)}; per iteration: {losses}"

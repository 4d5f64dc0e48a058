"""A built-in program run through its own main (`recorded_run.py mnist|faster|mask [NAME=VALUE ...] ARGS...`),
recording its trainable weights around its first optimizer step, so that two runs which split the same images
differently between ranks can be compared; for R-CNN with the models' randomness pinned per image.

R-CNN only, NAME=VALUE (a Python literal) before the program's arguments: a GluonCV FasterRCNN (and so MaskRCNN)
constructor argument instead of the one the model zoo passes, e.g. num_sample=8 (RoIs sampled per image for the RCNN
head) or rpn_train_post_nms=300 (RPN proposals per image in training): a cheaper model on the programs' code path.

Recorded by rank 0 in the model dir: `weights-step-0.npz` (once every rank has them, before the first step) and
`weights-step-1.npz` (after it), by the parameters' names, `parameter-paths.json`: {name: the path save_parameters
writes it under (e.g. class_predictor.weight)}, `hybridization-step-1.json`: how MXNet hybridized the net for that
step, and (R-CNN) `hybridization-validation-epoch-<e>.json`: how it hybridized the net for validation's forward passes
after epoch e. By
every rank r, in `optimizer-lr-rank-<r>.json`: for each optimizer step, the distinct learning rates the optimizer's
update used for the weights it updated in that step (what MXNet's optimizer computes for each weight's update, its lr
times the weight's lr_mult, read as the update asks for it: not the schedule's output, nor the log's). Everything
else is the program's: config, Session (Horovod), data split, Trainer, learning-rate rule, train step, outputs.

What is pinned for R-CNN, and why: the same image must get the same random draws whichever rank and batch it is in.
  * The train transform's draws (GluonCV's random flip and RPN anchor sampling, numpy) come from numpy's generator
    reseeded with the image's index before each image is read.
  * GluonCV's RCNNTargetSampler, the models' only random operator, draws one uniform vector per image in the
    network's forward: `uniform` gives a fixed permutation of [0, 1) instead, the same for every image, so a batch of
    two draws what two batches of one draw.
"""

import ast
import json
import os
import random
import sys

import mxnet as mx
import numpy as np

# PRIME is prime and larger than any draw (the C4 models' samplers draw 2100 and 2300 values), so i -> i * 7919 mod
# PRIME is one-to-one: distinct values, no ties to sort. Computed in float64, where they are exact.
MULTIPLIER, PRIME = 7919, 1_000_003


def fixed_uniform(module):
    def uniform(low=0, high=1, shape=None, dtype="float32", **_):
        values = module.arange(0, int(np.prod(shape)), dtype="float64") * MULTIPLIER % PRIME / PRIME
        return (low + (high - low) * values).astype(dtype or "float32").reshape(shape)

    return uniform


class ReseededPerImage:
    """A dataset whose items are read with numpy's and Python's generators reseeded by the item's index."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        np.random.seed(index)
        random.seed(index)
        return self.dataset[index]


def recording(training_class, trainable):
    """A subclass of the program's training class that saves `trainable(self.net)` on rank 0 before and after the
    first optimizer step (the Trainer's step, whatever calls it)."""

    class Recorded(training_class):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if hasattr(self, "train_transformed"):
                self.train_transformed = ReseededPerImage(self.train_transformed)
            self.save("weights-step-0.npz")
            self.save_paths("parameter-paths.json")
            step, steps, used = self.trainer.step, [], recording_learning_rates(self.trainer)

            def recorded_step(*step_args, **step_kwargs):
                used.clear()
                step(*step_args, **step_kwargs)
                steps.append(sorted(set(used)))
                if len(steps) == 1:
                    self.save("weights-step-1.npz")
                    self.save_hybridization("hybridization-step-1.json")
                self.save_learning_rates(steps)

            self.trainer.step = recorded_step

        def save(self, name):
            if self.session.rank == 0:
                os.makedirs(self.config.model_dir, exist_ok=True)
                params = trainable(self.net)
                np.savez(os.path.join(self.config.model_dir, name), **{k: p.data().asnumpy() for k, p in params.items()})

        def save_paths(self, name):
            if self.session.rank == 0 and hasattr(self.net, "_collect_params_with_prefix"):
                paths = {p.name: path for path, p in self.net._collect_params_with_prefix().items()}
                with open(os.path.join(self.config.model_dir, name), "w") as f:
                    json.dump(paths, f)

        def save_learning_rates(self, steps):
            os.makedirs(self.config.model_dir, exist_ok=True)
            path = os.path.join(self.config.model_dir, f"optimizer-lr-rank-{self.session.rank}.json")
            with open(path, "w") as f:
                json.dump(steps, f)

        def save_hybridization(self, name):
            """How MXNet hybridized the net for the step: whether its graph was built and the flags it got."""
            if self.session.rank == 0 and hasattr(self.net, "_flags"):
                with open(os.path.join(self.config.model_dir, name), "w") as f:
                    json.dump(hybridization(self.net), f)

    return Recorded


def hybridization(net, before=None):
    """How MXNet hybridized `net`: whether it is active, whether its graph was built (and is another than `before`, the
    graph it had earlier), and the flags it got."""
    return {"active": net._active, "graph_built": net._cached_op is not None,
            "new_graph": net._cached_op is not None and net._cached_op is not before,
            "flags": {k: v for k, v in net._flags if isinstance(v, (bool, int, float, str))}}


def recording_validation(validate):
    """R-CNN's validate, recording on rank 0 how the net was hybridized for validation's forward passes (its graph is
    built by the first of them): hybridization-validation-epoch-<e>.json in the model dir."""

    def recorded(session, model, net, val_ds, val_tf, val_batchify, ctx, config, epoch):
        training_graph = getattr(net, "_cached_op", None)
        result = validate(session, model, net, val_ds, val_tf, val_batchify, ctx, config, epoch)
        if session.rank == 0 and hasattr(net, "_flags"):
            os.makedirs(config.model_dir, exist_ok=True)
            with open(os.path.join(config.model_dir, f"hybridization-validation-epoch-{epoch}.json"), "w") as f:
                json.dump(hybridization(net, training_graph), f)
        return result

    return recorded


# id(optimizer) -> the list that receives the learning rates of its weight updates.
RECORDING = {}


def recording_learning_rates(trainer):
    """A list that receives the learning rate of every weight update the trainer's optimizers make (the updaters'
    optimizers: those that update the weights when the kvstore does not). MXNet's SGD asks `_get_lrs` (several
    weights at once) for the rates it passes to its update operator. Wrapped on the class, not the instance: the
    checkpoint pickles the optimizer."""
    used = []
    for optimizer in {id(u.optimizer): u.optimizer for u in trainer._updaters}.values():
        cls = type(optimizer)
        if not getattr(cls._get_lrs, "recorded", False):
            cls._get_lrs = recorded_get_lrs(cls._get_lrs)
        RECORDING[id(optimizer)] = used
    return used


def recorded_get_lrs(get_lrs):
    def _get_lrs(self, indices):
        lrs = get_lrs(self, indices)
        RECORDING.get(id(self), []).extend(float(lr) for lr in lrs)
        return lrs

    _get_lrs.recorded = True
    return _get_lrs


def overriding_construction(cls, overrides):
    """`cls` built with `overrides` in place of the constructor arguments its callers pass."""
    init = cls.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **{**kwargs, **overrides})

    cls.__init__ = __init__


def main(program, argv):
    """Runs the program (its main ends the process)."""
    if program == "mnist":
        from mxnet_programs import mnist

        mnist.MnistTraining = recording(mnist.MnistTraining, lambda net: net.collect_params())
        return mnist.main(argv)
    from mxnet_programs.rcnn import evaluation, training
    from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER
    from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK

    overrides = {}
    while argv and not argv[0].startswith("-"):
        name, value = argv.pop(0).split("=")
        overrides[name] = ast.literal_eval(value)
    if overrides:
        from gluoncv.model_zoo.rcnn.faster_rcnn.faster_rcnn import FasterRCNN

        overriding_construction(FasterRCNN, overrides)
    mx.symbol.random.uniform = fixed_uniform(mx.symbol)
    mx.ndarray.random.uniform = fixed_uniform(mx.ndarray)
    evaluation.validate = recording_validation(evaluation.validate)
    training.RcnnTraining = recording(training.RcnnTraining, lambda net: net.collect_train_params())
    return training.main({"faster": FASTER, "mask": MASK}[program], argv)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])

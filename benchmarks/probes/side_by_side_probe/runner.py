"""Inside the image, for benchmarks.gluoncv_side_by_side: writes the data and the one initial params file, and runs
GluonCV's own training script or a built-in program in this process with the same runtime patches, recording what
the side by side compares as JSON lines (one file per run).

    python runner.py prepare OUT --train N --val M --seed S
    python runner.py detector OUT
    python runner.py gluoncv faster|mask RECORD SCRIPT [the script's arguments]
    python runner.py ours faster|mask RECORD [the program's arguments]

The patches (GluonCV's files are never edited; none of its code is copied here):
- both: no random flip (gluoncv.data.transforms.image.random_flip returns the image as is); Python's, NumPy's and
  MXNet's generators seeded with SBS_SEED when the first training image is transformed (the RPN's anchor sampling
  draws from NumPy there, the RCNN sampler from MXNet in the forward pass: what each side drew before, building
  and initialising its network, then no longer matters), with SBS_RESEED=each at every training image (SBS_SEED
  plus the image's position: the draws then depend on nothing drawn before); each iteration's loss terms and time, COCOeval's stats
  and the time scoring starts are recorded, and the process's peak RSS at exit; with SBS_NO_STEP=1 the optimizer step is skipped (the validation run:
  the weights stay the file's).
- GluonCV's script: the model zoo's ImageNet backbone is not fetched (pretrained_base=False: every weight comes
  from --resume, the one params file); SBS_SHORT and SBS_MAX_SIZE, if set, replace the network's short and
  max_size (the scripts have no flag for them but with custom-model, FPN only); its training sampler yields the
  batches of the programs' own rule (mxnet_programs.rcnn.data.epoch_batches, same seed), SBS_STEPS of them
  (default: all), so both see the same images in the same order; SBS_EXPLAIN (comma-separated) applies what the
  built-in programs do differently, to measure each difference's share: `crowd` (Faster: train on crowd objects,
  COCODetection(use_crowd=True)), `bias-wd-off` (no weight decay on biases), `inline` (the forward and backward
  pass in the main thread, as the programs and GluonCV's Horovod path run it; its path without Horovod runs the
  first in the calling thread, the others in its Parallel executor's thread), `no-clip` (validation without
  BBoxClipToImage).
- the built-in program: run as its entrypoint, in this process (one rank).
"""

import atexit
import json
import os
import random
import resource
import runpy
import sys
import time

SEED = int(os.environ.get("SBS_SEED", "233"))
LOSS_TERMS = {"faster": 4, "mask": 5}


class Recorder:
    def __init__(self, path):
        self.path = path

    def __call__(self, event, **fields):
        with open(self.path, "a", encoding="utf-8") as f:  # append: GluonCV's Mask scores in a forked child
            f.write(json.dumps(dict(fields, event=event, t=time.time())) + "\n")


def patch_common(record):
    import mxnet as mx
    import numpy as np
    from gluoncv.data.transforms import image as timage
    from gluoncv.data.transforms.presets import rcnn as presets
    from pycocotools.cocoeval import COCOeval

    timage.random_flip = lambda src, px=0, py=0, copy=False: (src, (False, False))
    seeded = []
    every_image = os.environ.get("SBS_RESEED") == "each"
    for cls in (presets.FasterRCNNDefaultTrainTransform, presets.MaskRCNNDefaultTrainTransform):
        def transform(self, *args, _original=cls.__call__):
            if not seeded or every_image:
                seed = SEED + len(seeded)
                seeded.append(seed)
                random.seed(seed)
                np.random.seed(seed)
                mx.random.seed(seed)
                record("seeded", seed=seed)
            return _original(self, *args)
        cls.__call__ = transform

    evaluate, summarize = COCOeval.evaluate, COCOeval.summarize

    def evaluate_recorded(self):
        record("scoring", iou_type=self.params.iouType, images=len(self.params.imgIds))
        return evaluate(self)

    def summarize_recorded(self):
        summarize(self)
        record("stats", iou_type=self.params.iouType, stats=[float(v) for v in self.stats])

    COCOeval.evaluate, COCOeval.summarize = evaluate_recorded, summarize_recorded
    if os.environ.get("SBS_NO_STEP") == "1":
        mx.gluon.Trainer.step = lambda self, *args, **kwargs: None
        record("no_step")


def patch_gluoncv(model, record):
    import gluoncv
    import numpy as np
    from gluoncv import model_zoo
    from gluoncv.data import sampler
    from gluoncv.model_zoo.rcnn.faster_rcnn import data_parallel as faster_dp
    from gluoncv.model_zoo.rcnn.mask_rcnn import data_parallel as mask_dp
    from mxnet_programs.rcnn import data

    get_model = model_zoo.get_model

    def get_model_sized(name, **kwargs):
        net = get_model(name, **dict(kwargs, pretrained_base=False))
        if os.environ.get("SBS_SHORT"):  # GluonCV's scripts take the model zoo's 800 and 1333, no flag
            net.short, net.max_size = int(os.environ["SBS_SHORT"]), int(os.environ["SBS_MAX_SIZE"])
        return net
    model_zoo.get_model = get_model_sized

    class ProgramOrderSampler:
        """GluonCV's SplitSortedBucketSampler's place, with the built-in programs' batches."""

        def __init__(self, aspect_ratios, batch_size, num_parts=1, part_index=0, shuffle=True):
            self.ratios, self.batch, self.epoch = list(aspect_ratios), batch_size, 0
            self.steps = int(os.environ.get("SBS_STEPS", "0")) or len(self.ratios) // batch_size
            record("train_images", count=len(self.ratios))

        def __iter__(self):
            batches = data.epoch_batches(np, len(self.ratios), self.ratios, SEED, self.epoch, 0, 1, self.batch,
                                         self.steps)
            self.epoch += 1
            return iter(batches)

        def __len__(self):
            return self.steps

    sampler.SplitSortedBucketSampler = ProgramOrderSampler
    terms = LOSS_TERMS[model]
    for module in (faster_dp, mask_dp):
        def forward_backward(self, x, _original=module.ForwardBackwardTask.forward_backward):
            result = _original(self, x)
            record("iteration", losses=[float(v.asscalar()) for v in result[:terms]])
            return result
        module.ForwardBackwardTask.forward_backward = forward_backward
    explain = [e for e in os.environ.get("SBS_EXPLAIN", "").split(",") if e]
    record("explain", applied=explain)
    if "crowd" in explain:
        coco_init = gluoncv.data.COCODetection.__init__
        gluoncv.data.COCODetection.__init__ = lambda self, *a, **kw: coco_init(self, *a, **dict(kw, use_crowd=True))
    if "bias-wd-off" in explain:
        import mxnet as mx

        trainer_init = mx.gluon.Trainer.__init__

        def trainer_without_bias_wd(self, params, *args, **kwargs):
            for name, param in params.items():
                if name.endswith("bias"):
                    param.wd_mult = 0.0
            trainer_init(self, params, *args, **kwargs)
        mx.gluon.Trainer.__init__ = trainer_without_bias_wd
    if "inline" in explain:
        from gluoncv.utils import parallel

        class Inline:
            """Parallel's place: the task runs in the calling thread, at put()."""

            def __init__(self, num_workers, parallizable, serial_init=True):
                self.task, self.results = parallizable, []

            def put(self, x):
                self.results.append(self.task.forward_backward(x))

            def get(self):
                return self.results.pop(0)
        parallel.Parallel = Inline
    if "no-clip" in explain:
        gluoncv.nn.bbox.BBoxClipToImage.hybrid_forward = lambda self, F, x, img: x


def peak_rss(record):
    record("exit", max_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def patch_ours(record):
    from mxnet_programs import process
    from mxnet_programs.rcnn import data, train_step

    exit_now = process.exit_now  # os._exit: no atexit hook runs

    def exit_recorded(code):
        peak_rss(record)
        exit_now(code)
    process.exit_now = exit_recorded

    call, steps_per_epoch = train_step.TrainStep.__call__, data.steps_per_epoch

    def step_recorded(self, *args, **kwargs):
        values = call(self, *args, **kwargs)
        record("iteration", losses=[float(v) for v in values])
        return values

    def steps_recorded(num_items, *args, **kwargs):
        record("train_images", count=num_items)
        return steps_per_epoch(num_items, *args, **kwargs)

    train_step.TrainStep.__call__, data.steps_per_epoch = step_recorded, steps_recorded


def prepare(out, num_train, num_val, seed):
    """COCO layout with crowd objects (RLE and polygon) and boxes at the image edge (edge_objects.py), the
    train-only view the training runs read, a home whose ~/.mxnet/datasets/coco GluonCV's COCODetection finds, and
    one initial params file per model (the model zoo's network, seeded initialisation, no backbone download)."""
    import mxnet as mx
    from gluoncv import model_zoo
    from gluoncv.utils import random as gcv_random
    from sagemaker_mxnet_data import synthetic_coco

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import edge_objects

    coco = os.path.join(out, "coco")
    synthetic_coco.write_coco(coco, num_train=num_train, num_val=num_val, image_size=(200, 320), seed=seed)
    counts = {split: edge_objects.add(os.path.join(coco, "annotations", f"instances_{split}2017.json"))
              for split in ("train", "val")}
    train_only = os.path.join(out, "coco-train")
    os.makedirs(os.path.join(train_only, "annotations"))
    os.symlink(os.path.join(coco, "train2017"), os.path.join(train_only, "train2017"))
    os.symlink(os.path.join(coco, "annotations", "instances_train2017.json"),
               os.path.join(train_only, "annotations", "instances_train2017.json"))
    os.makedirs(os.path.join(out, "home", ".mxnet", "datasets"))
    os.symlink(coco, os.path.join(out, "home", ".mxnet", "datasets", "coco"))
    for model in ("faster", "mask"):
        gcv_random.seed(seed)
        net = model_zoo.get_model(f"{model}_rcnn_resnet50_v1b_coco", pretrained=False, pretrained_base=False)
        net.initialize()
        net(mx.nd.zeros((1, 3, 256, 256)))  # the deferred shapes; in inference: the file holds what the model
        # zoo's files hold (no training-only constants, which GluonCV's strict load_parameters refuses)
        net.save_parameters(os.path.join(out, f"init-{model}.params"))
    print(json.dumps(counts))


def detector(out):
    """detector-<model>.params: the initial weights with the class predictor's biases set so that every RoI scores
    the classes of the val set's objects (+5) above the background (-10) and the others (0): random weights detect
    nothing above the metrics' score thresholds, and these give each val image up to 100 detections of the right
    classes on the RPN's proposals, so that the mAPs compared are not all zero; Mask R-CNN's mask predictor's
    biases +10, so that each mask fills its box and segm is not all zero either."""
    import mxnet as mx
    from gluoncv import model_zoo

    with open(os.path.join(out, "coco", "annotations", "instances_val2017.json"), encoding="utf-8") as f:
        coco = json.load(f)
    ids = [c["id"] for c in coco["categories"]]
    present = sorted({ids.index(a["category_id"]) + 1 for a in coco["annotations"] if not a.get("iscrowd")})
    for model in ("faster", "mask"):
        net = model_zoo.get_model(f"{model}_rcnn_resnet50_v1b_coco", pretrained=False, pretrained_base=False)
        net.load_parameters(os.path.join(out, f"init-{model}.params"))
        bias = net.class_predictor.bias
        values = mx.nd.zeros(bias.shape)
        values[0] = -10.0
        for k in present:
            values[k] = 5.0
        bias.set_data(values)
        if model == "mask":  # every mask pixel inside its box: the pasted masks are the boxes, segm scores too
            net.mask.mask.bias.set_data(mx.nd.full(net.mask.mask.bias.shape, 10.0))
        net.save_parameters(os.path.join(out, f"detector-{model}.params"))
    print(json.dumps({"classes_detected": present}))


def main(argv):
    mode = argv[0]
    if mode == "prepare":
        import argparse

        parser = argparse.ArgumentParser()
        parser.add_argument("out")
        parser.add_argument("--train", type=int, default=8)
        parser.add_argument("--val", type=int, default=8)
        parser.add_argument("--seed", type=int, default=1)
        args = parser.parse_args(argv[1:])
        prepare(args.out, args.train, args.val, args.seed)
        detector(args.out)
        return
    if mode == "detector":
        detector(argv[1])
        return
    model, record = argv[1], Recorder(argv[2])
    patch_common(record)
    if mode == "gluoncv":
        script = argv[3]
        patch_gluoncv(model, record)
        sys.argv = [script, *argv[4:]]
        sys.path.insert(0, os.path.dirname(script))
    else:
        script = os.path.join(os.environ.get("SBS_PROGRAMS", "/src/entrypoints"), f"{model}_rcnn.py")
        patch_ours(record)
        sys.argv = [script, *argv[3:]]
    record("start", argv=sys.argv)
    atexit.register(peak_rss, record)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])

"""The R-CNN programs' training input pipeline, measured alone in the image (no network forward, no training):
benchmarks/rcnn_input.py runs this in a container and prints its JSON lines as tables.

The pipeline is the program's own (mxnet_programs.rcnn: inputs.load_channel, data.make_datasets, the model's
transforms and batchify, the DataLoader train_loader builds), on a COCO layout channel:
  stages   one process, one image at a time, each stage waited for: read + decode (GluonCV's dataset: the file
           read and decoded by mx.image.imread), the training transform (resize, flip, normalise, masks, RPN
           targets), batchify (one image per device, as GluonCV trains R-CNN on GPUs); ms per image
  loader   the DataLoader as the program builds it with W worker processes, consumed as training would (every
           array of every batch waited for): seconds to the first batch, images/s after it

    PYTHONPATH=/opt/entrypoints python measure.py DATA_DIR --model faster|mask --images N --workers 0 1 2 [--short 800] [--max-size 1333]
"""

import argparse
import json
import os
import time


def flat(value):
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from flat(item)
    else:
        yield value


def wait_all(value):
    for array in flat(value):
        if hasattr(array, "wait_to_read"):
            array.wait_to_read()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir")
    parser.add_argument("--model", choices=["faster", "mask"], required=True)
    parser.add_argument("--images", type=int, default=48, help="images per measurement")
    parser.add_argument("--workers", type=int, nargs="*", default=[])
    parser.add_argument("--stages", action="store_true", help="measure the stages one by one")
    parser.add_argument("--short", type=int, default=800)
    parser.add_argument("--max-size", type=int, default=1333)
    parser.add_argument("--network", default="resnet50_v1b")
    parser.add_argument("--use-fpn", action="store_true")
    args = parser.parse_args()

    import gluoncv
    import mxnet as mx
    from mxnet_programs.rcnn import data, inputs
    from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER
    from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK

    model = FASTER if args.model == "faster" else MASK
    split = "train2017"
    channel = inputs.load_channel(model, "train", args.data_dir, split,
                                  os.path.join(args.data_dir, "annotations", f"instances_{split}.json"), True)
    train_ds, _ = data.make_datasets(model, channel, None, gluoncv.data)
    net = gluoncv.model_zoo.get_model(model.model_name(args.network, args.use_fpn), pretrained=False,
                                      pretrained_base=False, per_device_batch_size=1)
    net.initialize()  # the transforms read the RPN's anchors (constants) from the net
    train_tf, batchify, _, _ = model.transforms(net, args.short, args.short, args.max_size, args.use_fpn, 1)
    count = min(args.images, len(train_ds))
    common = {"model": args.model, "images": count, "short": args.short, "max_size": args.max_size,
              "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "cpus": len(os.sched_getaffinity(0))}

    if args.stages:
        parts = {"read + decode": 0.0, "transform": 0.0, "batchify": 0.0}
        for index in list(range(count))[:2] + list(range(count)):  # the first two again: warm caches first
            start = time.perf_counter()
            raw = train_ds[index]
            wait_all(raw)
            decoded = time.perf_counter()
            sample = train_tf(*raw)
            wait_all(sample)
            transformed = time.perf_counter()
            wait_all(batchify([sample]))
            done = time.perf_counter()
            for name, seconds in zip(parts, (decoded - start, transformed - decoded, done - transformed)):
                parts[name] += seconds
        warmup = 2
        scale = 1000 / (count + warmup)
        print(json.dumps({**common, "kind": "stages", "ms_per_image": {k: v * scale for k, v in parts.items()}}),
              flush=True)

    transformed_ds = train_ds.transform(train_tf)
    for workers in args.workers:
        batches = [[i] for i in range(count)]
        loader = mx.gluon.data.DataLoader(transformed_ds, batch_sampler=data.ListBatchSampler(batches),
                                          batchify_fn=batchify, num_workers=workers)
        start = time.perf_counter()
        arrivals = []
        for batch in loader:
            wait_all(batch)
            arrivals.append(time.perf_counter())
        rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])
        print(json.dumps({**common, "kind": "loader", "workers": workers, "first_batch_s": arrivals[0] - start,
                          "images_per_s": rate}), flush=True)


if __name__ == "__main__":
    main()

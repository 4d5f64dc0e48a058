"""Faster R-CNN (GluonCV model zoo) on COCO-format data with Horovod: ``sagemaker_program=faster_rcnn``.

Run once per rank by the launcher under mpirun (``python /opt/entrypoints/faster_rcnn.py --key value``)
or directly as one process. ``--help`` lists every hyperparameter with its default; ``--batch_size`` and
``--batch-size`` are the same key; booleans are true/false/1/0 (anything else is an error).

Model: ``gluoncv.model_zoo.get_model('faster_rcnn[_fpn]_<network>_coco', pretrained=False,
pretrained_base=<--pretrained-base>)``, default faster_rcnn_resnet50_v1b_coco (the architecture's name: file names
keep it), with the train annotation file's categories as its classes (GluonCV's ``net.reset_class(classes)`` when they
are not COCO's 80 in COCO's order).

Data: channel ``train`` and ``val`` (optional), each in COCO 2017 layout, or the single ``data`` channel
of AWS's R-CNN Horovod walkthrough (``estimator.fit({"data": "s3://BUCKET/data"})``) holding COCO as it
ships: ``annotations/instances_train2017.json``, ``annotations/instances_val2017.json``, ``train2017/``,
``val2017/`` (train2017 trains, val2017 validates; ``--train-split`` / ``--val-split`` rename them; a
``val`` channel next to it validates instead). Every one of those paths must exist: a missing one fails at
once, exit 2, ``channel 'data' is incomplete: missing <path>``. ``train`` and ``data`` together are refused
(exit 2): pass one. The ``train``/``val`` layout::

    <channel>/annotations/instances_<split>.json     e.g. instances_train2017.json
    <channel>/<split>/<file_name>                     e.g. train2017/000000000009.jpg

  * The split is autodetected: the only ``annotations/instances_*.json`` of the channel, else the one
    whose split starts with ``train`` (``val`` for the val channel); ``--train-split`` /
    ``--val-split`` choose explicitly. Without a ``val`` channel, a ``val*`` split next to the train
    split in the train channel is used (so the stock COCO folder works as one channel); else no
    validation.
  * Image paths come from each image's ``file_name`` under the split folder (``coco_url`` is ignored).
  * ``categories``: any K >= 1, unique integer ids (any, not necessarily 1..K) and unique names; the classes are
    the train file's categories in its order (class i is its i-th category: classes.json in the model dir says so).
    The val file must list the same ids and names (in any order), else exit 2 naming both files.
  * Every referenced image must exist; this is checked up front, as is a non-empty train set.
  * Crowd objects (``iscrowd`` 1) never train, and an image of crowds alone is left out of training (GluonCV's
    train_faster_rcnn.py: COCODetection(use_crowd=False)); validation scores with pycocotools' own crowd rule.
  * Images too small for the RPN (fewer anchors at ``--short``/``--max-size`` than the 2000 proposals it keeps in
    training, or ``--rpn-test-post-nms`` in validation) stop the job at start (exit 2) naming what to change.
  * Where several ranks share a host, local rank 0 reads and checks the annotations (and the images'
    existence) once for its host and the other ranks load its result: one read of each annotation file per
    host, not per rank. The images are read lazily, each by the rank that trains or validates on it, so a
    FastFile channel (``TrainingInputMode: FastFile``, streamed from S3 on first read) is read once.
  * Upload example (stock COCO 2017)::

        aws s3 sync coco/annotations s3://BUCKET/coco/train/annotations --exclude '*' \\
            --include 'instances_train2017.json'
        aws s3 sync coco/train2017 s3://BUCKET/coco/train/train2017
        aws s3 sync coco/annotations s3://BUCKET/coco/val/annotations --exclude '*' --include 'instances_val2017.json'
        aws s3 sync coco/val2017 s3://BUCKET/coco/val/val2017
        # estimator.fit({"train": "s3://BUCKET/coco/train", "val": "s3://BUCKET/coco/val",
        #                "pretrained": "s3://BUCKET/mxnet-models"})   # holds resnet50_v1b-0ecdba34.params

  * Tiny synthetic data for smoke tests: ``python -m sagemaker_mxnet_data.synthetic_coco DIR [--classes a,b,c]``.

Fine-tuning (``--finetune-from PATH``, else the ``model`` channel: the SageMaker SDK's ``model_uri``): the network
starts from an earlier detector of the same architecture: this image's model output (its directory or model.tar.gz)
or a GluonCV params file (e.g. faster_rcnn_resnet50_v1b_coco-447328d8.params: COCO's 80 classes unless a classes.json
lies beside it). Every weight but the class rows comes from it; classes of the same name keep their rows of the
class, box (and mask) predictors, the others start fresh, the background row comes with any match (GluonCV's
``reset_class(classes, reuse_weights=...)`` rule); the start log names both kinds. No backbone is downloaded then.
A missing, unusable or mismatched file: exit 2 at start naming it. A checkpoint to resume from wins over it.

Pretrained backbone (``--pretrained-base true``, the default): GluonCV looks for
``$MXNET_HOME/models/<network>-<hash>.params`` (resnet50_v1b-0ecdba34.params; MXNET_HOME defaults to
~/.mxnet). If it is missing, a ``pretrained`` channel holding the file (SM_CHANNEL_PRETRAINED or
--pretrained-dir) is linked there; else, with --download-pretrained true, GluonCV's model store is
tried with short timeouts (MXNET_GLUON_REPO overrides its URL); else, or when that fails (no network,
SageMaker network isolation), the job fails within seconds, exit 2, saying how to provide the file.

Distribution: --horovod true (default): one process per GPU (mx.gpu(local_rank)) or per CPU rank;
each rank trains on its own shard of every epoch's permutation; gradients are averaged with Horovod.
The training channel (``train`` or ``data``) is split by global rank when it is FullyReplicated (every host
holds all of it), by local rank within each host when its S3DistributionType is ShardedByS3Key (each
host holds its own part, which must then be a complete COCO layout: its annotation file and the images it
lists); every rank runs as many iterations as the smallest part allows. Rank 0 logs which split it used.
Validation data from a ShardedByS3Key channel is refused (exit 2): COCO mAP is scored on rank 0 against the
whole validation set, so give it as a FullyReplicated ``val`` channel.
--horovod false: the non-Horovod baseline, one process over all GPUs of one host with MXNet's kvstore
(--kv-store device|local); more than one host in SM_HOSTS is an error.
On CPU the network's ROIAlign and box_nms are the image's ROIAlignCPU and BoxNMSCPU: MXNet's values to the last
bit in less time (the start log's cpu_ops=; --cpu-ops false: MXNet's own); the exported model uses MXNet's.
Learning rate: --lr is for a global batch of 8 images (GluonCV: 0.00125 per image); the optimizer
uses lr x global_batch / 8, warmed up linearly over --lr-warmup iterations from --lr-warmup-factor,
decayed by --lr-decay at each --lr-decay-epoch (epoch indexes from 0). The first log line shows the
effective lr.

Outputs (rank 0):
  * stdout metric lines (regexes: METRIC_DEFINITIONS), epochs numbered from 0::
        epoch=0 iter=20 loss=1.8 rpn_cls=0.6 rpn_box=0.1 rcnn_cls=0.9 rcnn_box=0.2 lr=0.00125 samples_per_sec=3.2
        epoch=0 train_loss=1.9 samples_per_sec=3.1 epoch_sec=1234.56
        epoch=0 val_bbox_map=0.0123 val_images=5000 val_sec=321.00
        epoch=0 class="bolt" val_bbox_ap=0.0456 val_objects=1234     (one per class; none: no objects of it)
    Each class's metric definitions: MODEL.class_metric_definitions(class names) (docs/programs.md).
  * model dir: <model>-final.params, <model>-best.params (best val_bbox_map), model.json (how to load, classes,
    history), classes.json ([{"id", "name"}] in class order), metrics.json (the best and the last validation, with
    each class's AP) and the best epoch's network exported for serving: model-symbol.json + model-0000.params
    (``mx.gluon.SymbolBlock.imports(symbol, ["data"], params)``; examples/rcnn_inference.py); written atomically.
  * checkpoint dir: <model>-epoch-NNNN.{params,states,json} every --save-interval epochs, newest
    --keep-checkpoints kept; a restarted job resumes from the newest at the right epoch.
  * output data dir: faster_rcnn_val_results.json (COCO detections of the last validation).
  * TensorBoard scalars (tensorboardX) in --tensorboard-dir (/opt/ml/output/tensorboard).

SIGTERM: the ranks agree to stop after the same iteration (the one running, or with several ranks the
next: the vote travels with the training without a sync per iteration), rank 0 writes a resumable
mid-epoch checkpoint, exit 143. A stop agreed at the end of an epoch skips its validation.
Exit codes: 0 done; 2 bad hyperparameter or input (one line ``faster_rcnn: error: ...`` on stderr,
before MPI is initialised where possible); 1 unexpected failure (traceback first); 143 SIGTERM.
"""

from mxnet_programs.rcnn.faster_rcnn import MODEL
from mxnet_programs.rcnn.training import main

METRIC_DEFINITIONS = MODEL.metric_definitions()

if __name__ == "__main__":
    main(MODEL)

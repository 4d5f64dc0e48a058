"""Mask R-CNN (GluonCV model zoo) on COCO-format data with Horovod: ``sagemaker_program=mask_rcnn``.

Everything works as in faster_rcnn.py (see its docstring for the data layout, the S3 upload example,
the pretrained-backbone lookup, distribution, learning-rate convention, outputs, SIGTERM and exit
codes), with these differences:

  * Model: ``mask_rcnn[_fpn]_<network>_coco`` (default mask_rcnn_resnet50_v1b_coco).
  * Annotations: every non-crowd object needs a polygon ``segmentation`` (a list of [x1, y1, x2, ...]
    lists, as in COCO); crowd (RLE) objects are skipped, as GluonCV's COCOInstance does.
  * Training lines add the mask loss, validation lines the mask mAP; the best model is chosen by
    val_segm_map::

        epoch=0 iter=20 loss=2.5 rpn_cls=0.6 rpn_box=0.1 rcnn_cls=0.9 rcnn_box=0.2 mask=0.7 lr=0.00125 samples_per_sec=2.1
        epoch=0 train_loss=2.6 samples_per_sec=2.0 epoch_sec=2345.67
        epoch=0 val_bbox_map=0.0123 val_segm_map=0.0101 val_images=5000 val_sec=456.00
        epoch=0 class="bolt" val_bbox_ap=0.0456 val_segm_ap=0.0321 val_objects=1234

  * Output data dir: mask_rcnn_val_results.json (COCO results with RLE masks).
  * The exported network also outputs each detection's mask over its box (14 x 14 for the C4 models).

Quick start on tiny synthetic data (CPU, one process)::

    python -m sagemaker_mxnet_data.synthetic_coco /tmp/coco --classes bolt,nut,washer
    python mask_rcnn.py --train-dir /tmp/coco --pretrained-base false --short 256 --max-size 320 \\
        --epochs 1 --max-iterations-per-epoch 2 --num-workers 0 --rpn-test-post-nms 50 \\
        --model-dir /tmp/model --checkpoint-dir /tmp/ckpt --tensorboard false
"""

from mxnet_programs.rcnn.mask_rcnn import MODEL
from mxnet_programs.rcnn.training import main

METRIC_DEFINITIONS = MODEL.metric_definitions()

if __name__ == "__main__":
    main(MODEL)

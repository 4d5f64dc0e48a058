"""GluonCV Faster R-CNN and Mask R-CNN on COCO-format data, data-parallel with Horovod.

The user-facing contract is the docstring of entrypoints/faster_rcnn.py (and mask_rcnn.py for what
differs). Standard library only at import time, like every module here but `data`, `train_step`,
`evaluation` and `training`, which run after the input was checked. One idea per module:

  faster_rcnn, mask_rcnn   what is particular to each model (the mask model extends the box model)
  cli                      hyperparameters and the frozen config built from them
  inputs                   COCO-layout channels found and checked with the standard library
  pretrained               the ImageNet backbone weights, found or downloaded with bounded waits
  schedule                 learning rate: warmup, step decay
  data                     per-epoch sampling, GluonCV datasets and loaders
  train_step               one iteration: forward, the R-CNN losses, backward
  cpu_ops                  on CPU, the image's ROIAlign and box_nms: MXNet's values in less time
  evaluation               distributed COCO mAP
  training                 the run: setup, epochs, checkpoints, outputs; `main`
"""

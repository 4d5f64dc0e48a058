"""The image's built-in training programs (mnist, faster_rcnn, mask_rcnn) and the skeleton they share.

The launcher runs /opt/entrypoints/<program>.py, a thin script that calls this package. Importing this
package (and its `rcnn` subpackage) costs nothing: the standard library only, so the launcher may load
parts of it without MXNet, and a program can check its input before paying for `import mxnet`.

One idea per module:
  process           exit codes, one-line errors, SIGTERM, the main every program runs through
  hyperparameters   ``--key value`` parsing as SageMaker sends it, into a frozen config
  sagemaker_env     rank layout, SageMaker paths and channels (read before MPI starts)
  channel_sharding  which part of a File-mode channel each rank reads
  files             atomic writes and model export
  checkpoints       numbered checkpoints in one directory
  metrics           metric lines and TensorBoard scalars
  session           Horovod (or its single-process stand-in), resume, stop vote, checkpoint, shutdown
  mnist, mnist_data the MNIST program
  rcnn/             the GluonCV Faster R-CNN and Mask R-CNN programs
"""

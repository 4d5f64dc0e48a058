#!/usr/bin/env bash
# usage: check-image.sh cpu|gpu   (the image stage of docker/Dockerfile, with the flavor's check kit, which
# holds this script, bind-mounted; after ldconfig)
#
# Build-time check of the image in its final filesystem, before the entrypoints and the launcher: the venv
# finds every shared library it needs here and the stack imports; any failure fails the build.
#   cpu: the stack imports, Horovod built with MPI and Gloo.
#   gpu: docker/cuda-shims/check-gpu-image.sh (no libcuda here: ELF dependencies, NVRTC, the SASS list, and
#        the stack imported with the kit's libcuda stub).
set -euo pipefail

flavor=${1:?usage: check-image.sh cpu|gpu}
case $flavor in
  cpu) python -c "import cv2, gluoncv, mpi4py, mxnet, pycocotools.coco, sagemaker_training, smdebug.mxnet; \
import horovod.mxnet as hvd; assert hvd.mpi_built() and hvd.gloo_built()" ;;
  gpu) "$(dirname "$0")/check-gpu-image.sh" ;;
  *) echo "check-image.sh: unknown flavor '$flavor' (cpu or gpu)" >&2; exit 2 ;;
esac

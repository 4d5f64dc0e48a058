#!/usr/bin/env bash
# usage: trim-venv.sh cpu|gpu   (the venv stage of docker/Dockerfile, on cpu-venv or gpu-venv)
#
# Removes from /opt/venv what the runtime never uses, then checks that the stack still imports:
#   both: cmake (a build tool; the image ships no compilers) and the packages' own test suites (~100 MB:
#         pandas, scipy, numpy, matplotlib, gevent). __pycache__ stays: every worker process imports
#         mxnet/scipy/pandas at start, and precompiled bytecode saves that.
#   gpu:  also the CUDA and MXNet headers; libcusolverMg (multi-GPU solver), libnvblas (BLAS interposer)
#         and libcufftw (FFTW API), which nothing in the image links or loads. Its import check runs with
#         the builder's libcuda.so.1 stub.
set -euo pipefail

flavor=${1:?usage: trim-venv.sh cpu|gpu}
case $flavor in
  cpu) built="hvd.mpi_built() and hvd.gloo_built()"; stub_env=() ;;
  gpu) built="hvd.nccl_built() and hvd.mpi_built() and hvd.gloo_built()"
       stub_env=(LD_LIBRARY_PATH=/opt/cuda/lib64/stubs) ;;
  *) echo "trim-venv.sh: unknown flavor '$flavor' (cpu or gpu)" >&2; exit 2 ;;
esac

site=$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
pip uninstall -y --no-cache-dir cmake
find "$site" -type d -name tests -prune -exec rm -rf {} +
if [ "$flavor" = gpu ]; then
  rm -rf "$site"/nvidia/*/include "$site/mxnet/include" \
         "$site/nvidia/cusolver/lib/libcusolverMg.so.11" "$site/nvidia/cublas/lib/libnvblas.so.11" \
         "$site/nvidia/cufft/lib/libcufftw.so.10"
  ldconfig
fi

pip check
env "${stub_env[@]}" python -c "import cv2, gluoncv, mpi4py, mxnet, pycocotools.coco, sagemaker_training, \
tensorboardX; import horovod.mxnet as hvd; assert $built"

#!/usr/bin/env bash
# usage: check-gpu-image.sh   (run by docker/check-image.sh gpu in the image stage of docker/Dockerfile,
# with the gpu-check-kit stage, which holds this script, bind-mounted; after ldconfig)
#
# Build-time checks of the GPU image in its final filesystem; any failure fails the build:
#  - every ELF file in the venv and the CUDA library dirs resolves every DT_NEEDED and version node,
#    libcuda.so.1 excepted, and no libcuda.so* is on the linker path;
#  - NVRTC compiles kernels to PTX through the libnvrtc.so.11.0 forwarder (no GPU needed);
#  - SMMH_CUDA_ARCHS is what cuobjdump found in libmxnet.so (the kit's sass-archs);
#  - with the kit's libcuda stub on LD_LIBRARY_PATH for this one command and LD_BIND_NOW=1:
#    mxnet (CUDA, cuDNN, NCCL, NVRTC) and horovod.mxnet (NCCL, MPI, Gloo) import, every CUDA library
#    loads with all symbols bound, and a cuSOLVER call goes through its forwarder.
set -euo pipefail

kit=$(dirname "$0")
python "$kit/check_elf_deps.py" --allow-missing libcuda.so.1 --skip '*/mpi4py/MPI.mpich.*.so' \
  /opt/venv /usr/local/lib/cuda11-forwarders
python "$kit/check_nvrtc.py"
mxnet_archs=$(cat "$kit/sass-archs")
if [ "$mxnet_archs" != "${SMMH_CUDA_ARCHS:?}" ]; then
  echo "SMMH_CUDA_ARCHS=\"$SMMH_CUDA_ARCHS\" but libmxnet.so has SASS for: $mxnet_archs" >&2
  exit 1
fi
LD_LIBRARY_PATH="$kit/stubs" LD_BIND_NOW=1 python "$kit/check_gpu_stack.py"

#!/usr/bin/env bash
# usage: build-horovod.sh cpu|gpu   (the cpu-venv and gpu-venv stages of docker/Dockerfile, after
# sourcing pip-preflight.sh)
#
# Compiles horovod==$HOROVOD_VERSION, with docker/horovod-enqueue-name.patch, into /opt/venv against the
# MXNet and Open MPI already there (--no-build-isolation: Horovod's CMake imports mxnet), with MPI and Gloo.
# Its extension is ~50 MB of debug symbols before strip, ~2 MB after. About 2-4 min on 2 cores.
#   gpu: also NCCL collectives (NCCL and cudart linked shared, from the wheels) and NVTX ranges for
#        profilers; the CUDA kernels are compiled by nvcc with g++-11 (nvcc 11.8 accepts gcc <= 11) for
#        HOROVOD_CUDA_ARCHS. Fails unless they cover every SASS architecture libmxnet.so has
#        (/tmp/build/sass-archs, from setup-cuda-libraries.sh).
set -euo pipefail

flavor=${1:?usage: build-horovod.sh cpu|gpu}
build_env=(
  HOROVOD_WITH_MXNET=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1
  HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1
  MAKEFLAGS="-j$(nproc)"
)
case $flavor in
  cpu) ;;
  gpu)
    # The libcuda.so.1 stub is on LD_LIBRARY_PATH for this build only: the CMake step imports mxnet.
    build_env+=(
      HOROVOD_WITH_NVTX=1 HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED HOROVOD_NCCL_HOME=/opt/cuda
      HOROVOD_CUDA_HOME=/opt/cuda HOROVOD_BUILD_CUDA_CC_LIST="${HOROVOD_CUDA_ARCHS:?}"
      CC=gcc-11 CXX=g++-11 CUDAHOSTCXX=g++-11 PATH="/opt/cuda/bin:$PATH"
      LD_LIBRARY_PATH=/opt/cuda/lib64/stubs
    )
    ;;
  *) echo "build-horovod.sh: unknown flavor '$flavor' (cpu or gpu)" >&2; exit 2 ;;
esac

# From its source release, patched: docker/horovod-enqueue-name.patch says why. The patch must apply exactly
# (apply-patch.sh), so a new Horovod version fails here until the patch is reviewed.
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends patch
rm -rf /var/lib/apt/lists/*
src=/tmp/build/horovod-src
pip download --no-deps --no-binary horovod --dest "$src" "horovod==${HOROVOD_VERSION:?}"
tar -xzf "$src/horovod-${HOROVOD_VERSION}.tar.gz" -C "$src"
"$(dirname "$0")/apply-patch.sh" "$src/horovod-${HOROVOD_VERSION}" "$(dirname "$0")/horovod-enqueue-name.patch"
env "${build_env[@]}" pip install --no-cache-dir --no-build-isolation "$src/horovod-${HOROVOD_VERSION}"
rm -rf "$src"
find /opt/venv -name '*.so' -path '*/horovod/*' -exec strip --strip-unneeded {} +

if [ "$flavor" = gpu ]; then
  site=$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  cubins=$(/opt/cuda/bin/cuobjdump --list-elf "$site"/horovod/mxnet/mpi_lib.*.so)
  mxnet_archs=$(cat /tmp/build/sass-archs)
  for arch in $mxnet_archs; do
    if ! grep -q "\.sm_${arch}\.cubin$" <<<"$cubins"; then
      echo "Horovod's CUDA kernels lack sm_$arch, which libmxnet.so runs on (HOROVOD_CUDA_ARCHS)" >&2
      exit 1
    fi
  done
  echo "Horovod has SASS for every architecture libmxnet.so has: $mxnet_archs"
fi

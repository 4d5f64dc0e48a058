#!/usr/bin/env bash
# usage: setup-cuda-libraries.sh   (the gpu-venv stage of docker/Dockerfile, after the CUDA wheels are in
# /opt/venv and the cuda-toolkit stage's /opt/cuda is copied in)
#
# 1. Forwarders libcusolver.so.10 -> libcusolver.so.11 and libnvrtc.so.11.0 -> libnvrtc.so.11.2 in
#    /usr/local/lib/cuda11-forwarders, generated from the symbols libmxnet.so imports (fails if the
#    CUDA 11.x library lacks one).
# 2. The CUDA library dirs (the wheels' nvidia/*/lib) and the forwarders registered with the dynamic
#    linker: /etc/ld.so.conf.d + ldconfig, as in the final image; no LD_LIBRARY_PATH.
# 3. A libcuda.so.1 stub in /opt/cuda/lib64/stubs for importing mxnet at build time (Horovod's CMake
#    does), exporting the driver functions libmxnet.so imports. LD_LIBRARY_PATH points at it only in
#    the commands that import mxnet.
# 4. /opt/cuda completed with the wheels' headers and libraries; libcudart_static.a and libcudadevrt.a,
#    which CMake and nvcc ask for and the wheels lack, link the shared cudart instead.
# 5. The SASS architectures libmxnet.so ships, in /tmp/build/sass-archs, for the gpu stage's
#    SMMH_CUDA_ARCHS check and Horovod's; fails if libmxnet.so carries PTX (the launcher assumes none).
set -euo pipefail

here=$(dirname "$0")
site=$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
mx=$site/mxnet/libmxnet.so
fwd=/usr/local/lib/cuda11-forwarders
shims=/tmp/build/shims

python "$here/make_forwarder.py" forwarder --cc gcc --consumer "$mx" --out-dir "$shims" \
  --soname libcusolver.so.10 --target "$site/nvidia/cusolver/lib/libcusolver.so.11"
python "$here/make_forwarder.py" forwarder --cc gcc --consumer "$mx" --out-dir "$shims" \
  --soname libnvrtc.so.11.0 --target "$site/nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2"
install -D -m 0755 -t "$fwd" "$shims/libcusolver.so.10" "$shims/libnvrtc.so.11.0"
printf '%s\n' "$fwd" "$site"/nvidia/*/lib > /etc/ld.so.conf.d/sagemaker-cuda.conf
ldconfig

python "$here/make_forwarder.py" stub --cc gcc --consumer "$mx" --out-dir /opt/cuda/lib64/stubs \
  --soname libcuda.so.1
ln -s libcuda.so.1 /opt/cuda/lib64/stubs/libcuda.so

for h in "$site"/nvidia/*/include/[!_]*; do ln -s "$h" /opt/cuda/include/; done
ln -s "$site/nvidia/cuda_runtime/lib/libcudart.so.11.0" /opt/cuda/lib64/libcudart.so
ln -s "$site/nvidia/nccl/lib/libnccl.so.2" /opt/cuda/lib64/libnccl.so
ln -s "$site/nvidia/nvtx/lib/libnvToolsExt.so.1" /opt/cuda/lib64/libnvToolsExt.so
echo 'INPUT(/opt/cuda/lib64/libcudart.so)' > /opt/cuda/lib64/libcudart_static.a
printf '!<arch>\n' > /opt/cuda/lib64/libcudadevrt.a

/opt/cuda/bin/cuobjdump --list-elf "$mx" | sed -n 's/.*\.sm_\([0-9]*\)\.cubin$/\1/p' | sort -nu \
  | paste -sd' ' > /tmp/build/sass-archs
# Captured first: grep -q ending a pipe early would make cuobjdump fail with SIGPIPE under pipefail.
ptx=$(/opt/cuda/bin/cuobjdump --list-ptx "$mx" 2>&1 || true)
if grep -q '^PTX file' <<<"$ptx"; then
  echo "libmxnet.so carries PTX; SMMH_CUDA_ARCHS and the launcher assume SASS only" >&2
  exit 1
fi
echo "libmxnet.so SASS: $(cat /tmp/build/sass-archs); no PTX"
grep -qE '^[0-9]+( [0-9]+)*$' /tmp/build/sass-archs

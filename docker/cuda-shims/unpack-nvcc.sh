#!/usr/bin/env bash
# usage: unpack-nvcc.sh   (the cuda-toolkit stage of docker/Dockerfile; CUDA_VERSION from its ARG)
#
# Assembles the compiler half of a CUDA toolkit in /opt/cuda from Debian's non-free nvidia-cuda-toolkit
# .deb: nvcc, cicc, ptxas, fatbinary, nvlink, cudafe++, bin2c, cuobjdump and libdevice. The .deb is only
# unpacked (dpkg -x): installing it would pull nvidia-cuda-dev (2 GB of libraries and headers that
# NVIDIA's wheels already provide). non-free is enabled for this download only, from the base image's
# mirror. gcc/g++ in /opt/cuda/bin are gcc-11/g++-11, the newest host compiler nvcc 11.8 accepts.
set -euo pipefail

if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  sed 's/^Components: .*/Components: non-free/' /etc/apt/sources.list.d/debian.sources \
    > /etc/apt/sources.list.d/non-free.sources
else
  sed -n 's/^\(deb\s\+\(\[[^]]*\]\s\+\)\?\S\+\s\+\S\+\)\s.*$/\1 non-free/p' /etc/apt/sources.list \
    > /etc/apt/sources.list.d/non-free.list
fi
apt-get update
# apt-get download runs as _apt, which must be able to write the download directory.
install -d -o _apt /tmp/deb
cd /tmp/deb
apt-get download nvidia-cuda-toolkit
dpkg -x nvidia-cuda-toolkit_*.deb root
deb=/tmp/deb/root/usr
install -d /opt/cuda/bin /opt/cuda/include /opt/cuda/lib64/stubs /opt/cuda/nvvm
cp -a "$deb"/lib/nvidia-cuda-toolkit/bin/nvcc "$deb"/lib/nvidia-cuda-toolkit/bin/cicc \
      "$deb"/lib/nvidia-cuda-toolkit/bin/crt "$deb"/bin/ptxas "$deb"/bin/fatbinary "$deb"/bin/nvlink \
      "$deb"/bin/cudafe++ "$deb"/bin/bin2c "$deb"/bin/cuobjdump /opt/cuda/bin/
cp -a "$deb"/lib/nvidia-cuda-toolkit/libdevice /opt/cuda/nvvm/libdevice
ln -s /usr/bin/gcc-11 /opt/cuda/bin/gcc
ln -s /usr/bin/g++-11 /opt/cuda/bin/g++
cd /
rm -rf /tmp/deb /var/lib/apt/lists/* /etc/apt/sources.list.d/non-free.*
/opt/cuda/bin/nvcc --version | grep -F ", V${CUDA_VERSION:?}"

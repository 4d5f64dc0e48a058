# nvcc.profile for the CUDA_HOME the cuda-toolkit stage of docker/Dockerfile assembles in /opt/cuda
# (builder stages only): nvcc, cicc, ptxas, ... from Debian's nvidia-cuda-toolkit .deb in bin/,
# libdevice in nvvm/, headers and libraries from NVIDIA's wheels in include/ and lib64/.
# bin/ also holds gcc and g++ links to gcc-11/g++-11, the newest host compiler nvcc 11.8 accepts; it
# comes first on nvcc's PATH, so a bare nvcc call uses it too.
TOP                 = $(_HERE_)/..
NVVMIR_LIBRARY_DIR  = $(TOP)/nvvm/libdevice
PATH               += $(_HERE_):
INCLUDES           +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES          =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS       +=
PTXAS_FLAGS        +=

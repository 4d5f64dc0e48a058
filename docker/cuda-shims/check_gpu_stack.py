"""Build-time check of the GPU image's Python stack, run with a libcuda.so.1 stub and LD_BIND_NOW=1.

The image stage of docker/Dockerfile runs this for GPU (check-gpu-image.sh) with the builder's libcuda
stub on LD_LIBRARY_PATH for this one command (the stub is bind-mounted, never copied) and LD_BIND_NOW=1,
so every symbol of every library loaded here is bound at load time: a function missing from a forwarder,
a CUDA library or the stub fails the build here instead of at the first call on a GPU host. It checks:
  - mxnet imports, with CUDA, cuDNN, NCCL and runtime compilation (NVRTC) enabled;
  - horovod.mxnet imports and was built with NCCL, MPI and Gloo (and CUDA);
  - every shared library on the CUDA library path loads with all symbols bound, including the ones
    only dlopen()ed later (cuDNN's sub-libraries, libnvrtc-builtins);
  - a call through the libcusolver.so.10 forwarder returns a status (no GPU here), without crashing.
"""

import ctypes
import os
import sys

CUDA_CONF = "/etc/ld.so.conf.d/sagemaker-cuda.conf"


def main() -> int:
    if os.environ.get("LD_BIND_NOW") != "1":
        raise SystemExit("check_gpu_stack: run with LD_BIND_NOW=1")

    import cv2  # noqa: F401
    import gluoncv  # noqa: F401
    import mpi4py  # noqa: F401
    import mxnet as mx
    import pycocotools.coco  # noqa: F401
    import sagemaker_training  # noqa: F401
    import smdebug.mxnet  # noqa: F401 - SageMaker Debugger's hook (docker/install-smdebug.sh)
    import tensorboardX  # noqa: F401
    from mxnet.runtime import Features

    features = Features()
    wanted = ("CUDA", "CUDNN", "NCCL", "CUDA_RTC")
    disabled = [name for name in wanted if not features.is_enabled(name)]
    if disabled:
        raise SystemExit(f"check_gpu_stack: mxnet {mx.__version__} lacks {', '.join(disabled)}")
    print(f"check_gpu_stack: mxnet {mx.__version__} imported with {', '.join(wanted)}")

    import horovod.mxnet as hvd

    built = {"nccl": hvd.nccl_built(), "mpi": hvd.mpi_built(), "gloo": hvd.gloo_built(), "cuda": hvd.cuda_built()}
    if not all(built.values()):
        raise SystemExit(f"check_gpu_stack: horovod.mxnet built without {[k for k, v in built.items() if not v]}")
    print(f"check_gpu_stack: horovod.mxnet built with {', '.join(f'{k}={v}' for k, v in built.items())}")

    with open(CUDA_CONF) as f:
        dirs = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    loaded = 0
    for directory in dirs:
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if ".so" in name and os.path.isfile(path) and not os.path.islink(path):
                ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
                loaded += 1
    print(f"check_gpu_stack: {loaded} libraries in {len(dirs)} CUDA library dirs load with all symbols bound")

    cusolver = ctypes.CDLL("libcusolver.so.10")
    handle = ctypes.c_void_p()
    status = cusolver.cusolverDnCreate(ctypes.byref(handle))
    print(f"check_gpu_stack: cusolverDnCreate through the forwarder returned status {status} (no GPU here)")
    if status == 0:
        cusolver.cusolverDnDestroy(handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Build-time check: NVRTC works on the CPU through the libnvrtc.so.11.0 forwarder.

MXNet's pointwise fusion compiles kernels at run time with NVRTC, through the forwarder built by
make_forwarder.py. This loads the forwarder by soname (as libmxnet.so does), calls each of the 10
functions libmxnet.so imports from it, and compiles a templated kernel to PTX for every architecture
the image supports. No GPU or driver is needed. Exit 1 on any failure.
"""

import ctypes
import sys

FORWARDER = "libnvrtc.so.11.0"
TARGET = "libnvrtc.so.11.2"
# compute_XY for the GPUs the image's MXNet build runs on: V100 (70), T4 (75), A100 (80), A10G (86)
# and the older sm_50/sm_60 its SASS covers.
ARCHS = ("50", "60", "70", "75", "80", "86")
SOURCE = b"""
template <typename T>
__global__ void axpy(T a, const T *x, T *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
"""
EXPRESSION = b"axpy<float>"


def main() -> int:
    nvrtc = ctypes.CDLL(FORWARDER)
    nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
    nvrtc.nvrtcGetErrorString.argtypes = [ctypes.c_int]

    def check(status: int, what: str) -> None:
        if status != 0:
            raise SystemExit(f"check_nvrtc: {what} failed: {nvrtc.nvrtcGetErrorString(status).decode()}")

    with open("/proc/self/maps") as f:
        maps = f.read()
    for soname in (FORWARDER, TARGET):
        if f"/{soname}\n" not in maps:
            raise SystemExit(f"check_nvrtc: {soname} is not mapped: the forwarder chain is not in use")

    for arch in ARCHS:
        program = ctypes.c_void_p()
        check(nvrtc.nvrtcCreateProgram(ctypes.byref(program), SOURCE, b"axpy.cu", 0, None, None), "nvrtcCreateProgram")
        check(nvrtc.nvrtcAddNameExpression(program, EXPRESSION), "nvrtcAddNameExpression")
        options = (ctypes.c_char_p * 1)(f"--gpu-architecture=compute_{arch}".encode())
        status = nvrtc.nvrtcCompileProgram(program, 1, options)
        log_size = ctypes.c_size_t()
        check(nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(log_size)), "nvrtcGetProgramLogSize")
        log = ctypes.create_string_buffer(log_size.value)
        check(nvrtc.nvrtcGetProgramLog(program, log), "nvrtcGetProgramLog")
        if status != 0:
            print(log.value.decode(errors="replace"), file=sys.stderr)
        check(status, f"nvrtcCompileProgram(compute_{arch})")
        lowered = ctypes.c_char_p()
        check(nvrtc.nvrtcGetLoweredName(program, EXPRESSION, ctypes.byref(lowered)), "nvrtcGetLoweredName")
        ptx_size = ctypes.c_size_t()
        check(nvrtc.nvrtcGetPTXSize(program, ctypes.byref(ptx_size)), "nvrtcGetPTXSize")
        ptx_buffer = ctypes.create_string_buffer(ptx_size.value)
        check(nvrtc.nvrtcGetPTX(program, ptx_buffer), "nvrtcGetPTX")
        ptx = ptx_buffer.value.decode()
        entry = lowered.value.decode()
        check(nvrtc.nvrtcDestroyProgram(ctypes.byref(program)), "nvrtcDestroyProgram")
        version = next((line.split()[1] for line in ptx.splitlines() if line.startswith(".version")), "?")
        if f".target sm_{arch}" not in ptx or f".entry {entry}(" not in ptx:
            raise SystemExit(f"check_nvrtc: compute_{arch}: PTX lacks .target sm_{arch} or .entry {entry}")
        print(f"check_nvrtc: compute_{arch}: {len(ptx)} bytes of PTX ISA {version}, entry {entry}")
    print(f"check_nvrtc: {FORWARDER} -> {TARGET} compiles kernels to PTX")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The image's CPU operators for the R-CNN networks (docker/mxnet-ops/): MXNet's values, in less time on CPU.

At short side 800 on 2 cores, two of MXNet 1.9's CPU operators took a fifth of a Faster R-CNN training iteration
(MXNet's profiler: 2.2 s and 1.5 s of 16.4 s): ROIAlign's backward, one serial loop (13%, the other core idle), and
box_nms, which visits every pair of the RPN's 12000 proposals (9%). ROIAlignCPU and BoxNMSCPU give the same outputs
and gradients, to the last bit (tests/programs/rcnn/test_cpu_ops.py): the first splits its backward's channels over
the OpenMP threads, the second skips what MXNet's computes for nothing.

`route(mx)` sends GluonCV's calls, `F.contrib.ROIAlign` and `F.contrib.box_nms` (F is mx.sym in a hybridized
network, mx.nd otherwise), to them for the rest of the process; the programs call it when they train on CPU. Inside
`mxnet_operators()` MXNet's own are used again: the exported model must load where the library is not.
"""

import contextlib
import os
import threading

LIBRARY = "/opt/venv/lib/mxnet-ops/libcpu_ops.so"
OPERATORS = ("ROIAlignCPU", "BoxNMSCPU")

_state = threading.local()


def _mxnet_only():
    return getattr(_state, "mxnet_operators", False)


def _roi_align(mxnet_op, cpu_op):
    def roi_align(data, rois, pooled_size, spatial_scale, sample_ratio=-1, position_sensitive=False, aligned=False,
                  **kwargs):
        params = dict(pooled_size=pooled_size, spatial_scale=spatial_scale, sample_ratio=sample_ratio, aligned=aligned)
        if position_sensitive or _mxnet_only():  # position_sensitive: not in ROIAlignCPU
            return mxnet_op(data, rois, position_sensitive=position_sensitive, **params, **kwargs)
        return cpu_op(data, rois, **params, **kwargs)

    roi_align.mxnet_op = mxnet_op
    return roi_align


def _box_nms(mxnet_op, cpu_op):
    def box_nms(data, **params):
        if params.get("in_format", "corner") != params.get("out_format", "corner") or _mxnet_only():
            return mxnet_op(data, **params)  # a change of box format: not in BoxNMSCPU
        return cpu_op(data, **params)

    box_nms.mxnet_op = mxnet_op
    return box_nms


def route(mx, library=LIBRARY) -> bool:
    """Loads the library and routes contrib.ROIAlign and contrib.box_nms, NDArray and Symbol, to its operators.
    False when the library is not there (a program run outside the image): MXNet's operators stay."""
    if not os.path.exists(library):
        return False
    if not all(hasattr(mx.nd, name) for name in OPERATORS):
        mx.library.load(library, verbose=False)
    for contrib, ops in ((mx.ndarray.contrib, mx.nd), (mx.symbol.contrib, mx.sym)):
        roi_align = getattr(contrib.ROIAlign, "mxnet_op", contrib.ROIAlign)
        contrib.ROIAlign = _roi_align(roi_align, ops.ROIAlignCPU)
        box_nms = getattr(contrib.box_nms, "mxnet_op", contrib.box_nms)
        contrib.box_nms = _box_nms(box_nms, ops.BoxNMSCPU)
    return True


@contextlib.contextmanager
def mxnet_operators():
    """MXNet's own ROIAlign and box_nms for the graphs built in this block (in this thread)."""
    before = _mxnet_only()
    _state.mxnet_operators = True
    try:
        yield
    finally:
        _state.mxnet_operators = before

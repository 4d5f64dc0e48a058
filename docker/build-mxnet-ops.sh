#!/usr/bin/env bash
# usage: build-mxnet-ops.sh cpu|gpu   (the venv stage of docker/Dockerfile, before trim-venv.sh removes MXNet's headers)
#
# Compiles the R-CNN programs' CPU operators (docker/mxnet-ops/*.cc: ROIAlignCPU, BoxNMSCPU) into one library,
# /opt/venv/lib/mxnet-ops/libcpu_ops.so, against the lib_api.h and lib_api.cc that the MXNet wheel ships, then checks
# it in a process that imported horovod.mxnet first: each operator's output and gradient equal its MXNet
# counterpart's (contrib.ROIAlign, contrib.box_nms) to the last bit on a small input (GPU flavor: with the
# builder's libcuda stub).
set -euo pipefail

flavor=${1:?usage: build-mxnet-ops.sh cpu|gpu}
case $flavor in
  cpu) stub_env=() ;;
  gpu) stub_env=(LD_LIBRARY_PATH=/opt/cuda/lib64/stubs) ;;
  *) echo "build-mxnet-ops.sh: unknown flavor '$flavor' (cpu or gpu)" >&2; exit 2 ;;
esac

sources=$(dirname "$0")/mxnet-ops
mxnet=$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/mxnet
out=/opt/venv/lib/mxnet-ops
mkdir -p "$out"
# -ffp-contract=off: no fused multiply-adds, so the arithmetic stays MXNet's, operation by operation.
# -Bsymbolic: the library's calls into its own copy of lib_api bind to that copy; without it, in a process that
# imported horovod.mxnet first (every Horovod rank), loading it crashed in lib_api's registration.
g++ -std=c++17 -O3 -fopenmp -fPIC -shared -ffp-contract=off -Wl,-Bsymbolic -I"$mxnet/include" \
  -o "$out/libcpu_ops.so" "$sources"/*.cc "$mxnet/src/lib_api.cc"

env "${stub_env[@]}" python - "$out/libcpu_ops.so" <<'PY'
import sys

import horovod.mxnet  # noqa: F401  (loaded first, as in every Horovod rank)
import mxnet as mx
import numpy as np

mx.library.load(sys.argv[1], verbose=False)
rng = np.random.RandomState(0)


def output_and_gradient(op, data, head, *args, **params):
    x = mx.nd.array(data)
    x.attach_grad()
    with mx.autograd.record():
        y = op(x, *args, **params)
    y.backward(mx.nd.array(head))
    return y.asnumpy(), x.grad.asnumpy()


corners = rng.uniform(-20, 200, (12, 2))
rois = mx.nd.array(np.hstack([np.zeros((12, 1)), corners, corners + rng.uniform(0, 160, (12, 2))]).astype("float32"))
data, head = rng.randn(1, 8, 9, 11).astype("float32"), rng.randn(12, 8, 7, 7).astype("float32")
pairs = {"ROIAlignCPU": [output_and_gradient(op, data, head, rois, pooled_size=(7, 7), spatial_scale=1 / 16,
                                             sample_ratio=2) for op in (mx.nd.contrib.ROIAlign, mx.nd.ROIAlignCPU)]}
boxes = np.concatenate([rng.rand(1, 50, 1), np.sort(rng.uniform(0, 100, (1, 50, 4)), axis=-1)], axis=-1)
boxes = boxes.astype("float32")
head = rng.randn(1, 50, 5).astype("float32")
pairs["BoxNMSCPU"] = [output_and_gradient(op, boxes, head, overlap_thresh=0.3, topk=40, coord_start=1, score_index=0,
                                          id_index=-1, force_suppress=True)
                      for op in (mx.nd.contrib.box_nms, mx.nd.BoxNMSCPU)]
for name, ((y0, g0), (y1, g1)) in pairs.items():
    assert np.array_equal(y0, y1) and np.array_equal(g0, g1), f"{name} differs from MXNet's operator"
    assert np.abs(g0).sum() > 0
print("ROIAlignCPU and BoxNMSCPU: outputs and gradients equal to MXNet's operators")
PY

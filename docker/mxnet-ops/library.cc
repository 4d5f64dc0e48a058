// The R-CNN programs' CPU operators for MXNet 1.9, one library loaded with mx.library.load
// (entrypoints/mxnet_programs/rcnn/cpu_ops.py): ROIAlignCPU (roi_align.cc) and BoxNMSCPU (box_nms.cc), each MXNet's
// contrib operator's output and gradient to the last bit, in less time on CPU. Built by
// docker/build-mxnet-ops.sh.

#include "mxnet/lib_api.h"

mxnet::ext::MXReturnValue initialize(int version) {
  if (version < 10700) {
    MX_ERROR_MSG << "the R-CNN CPU operators need MXNet 1.7 or newer, loaded into " << version;
    return mxnet::ext::MX_FAIL;
  }
  return mxnet::ext::MX_SUCCESS;
}

"""How the launcher starts the R-CNN programs (faster_rcnn, mask_rcnn): their launch rules, next to their code.

The launcher's planner loads this file by its path (sagemaker_mxnet_horovod.parse.launch_rules), so it stays standard
library only and self-contained. What a launch module may declare, each optional, is documented there
(LaunchRules) and in docs/launcher.md.
"""

# The GPU memory and engine settings GluonCV's R-CNN scripts set on import (train_faster_rcnn.py and train_mask_rcnn.py
# at dmlc/gluon-cv 1ff5446, tuned for V100s), each program its own script's. First-step costs on GPUs (not measured:
# no GPU here):
#   * MXNET_CUDNN_AUTOTUNE_DEFAULT=0: cuDNN autotuning benchmarks every convolution's algorithms the first time it
#     sees an input shape, and MXNet caches the choice per shape in the process only. R-CNN's input shape is each
#     image's resized size (aspect ratios vary, --short may be a range), so autotuning would run again on nearly
#     every new image all through training, not once; MXNet's heuristic choice is kept instead.
#   * MXNET_USE_FUSION=0 (Mask R-CNN only, as its script since GluonCV 0.9; no reason given there, and no GPU here to
#     measure it): MXNet's pointwise fusion, on by default, compiles each fused kernel with NVRTC once per process and
#     the driver JIT-compiles its PTX into CUDA's JIT cache (~/.nv/ComputeCache, kept across warm-pool jobs by the
#     launcher: plan/env_rules.py's warm_pool_cache). Faster R-CNN keeps it on, as its script does.
_GPU_MXNET = (
    ("MXNET_GPU_MEM_POOL_TYPE", "Round"),
    ("MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD", "999"),
    ("MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD", "25"),
    ("MXNET_GPU_COPY_NTHREADS", "1"),
    ("MXNET_OPTIMIZER_AGGREGATION_SIZE", "54"),
    ("MXNET_CUDNN_AUTOTUNE_DEFAULT", "0"),
)
_PROGRAM_GPU_MXNET = {
    "faster_rcnn": (("MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF", "26"),),
    "mask_rcnn": (("MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF", "28"), ("MXNET_USE_FUSION", "0")),
}


def environment(program, gpu_count):
    """(variable, value, why) defaults for every rank of `program` on a host with `gpu_count` GPUs."""
    if not gpu_count:
        return []
    why = f"GluonCV's train_{program}.py on GPUs"
    return [(name, value, why) for name, value in _GPU_MXNET + _PROGRAM_GPU_MXNET.get(program, ())]


# `horovod=false` is the non-Horovod baseline: one process per host over all of its devices with MXNet's
# kvstore, so no MPI and one host only.
SINGLE_PROCESS_WHEN_FALSE = {"horovod": "one process over all devices with MXNet's kvstore"}

# DataLoader workers per rank on CPU hosts: a CPU rank trains ~0.05-0.1 images/s, which one worker feeds many times
# over; 4 (the earlier default for every host) measured no slower (benchmarks/rcnn_first_iteration.py), so it stays.
CPU_LOADER_WORKERS = 4


def default_loader_workers(gpu_count, ranks_per_host, cores):
    """DataLoader workers per rank when --num-workers is not given. On a GPU host every core but the training
    process's own: one core decodes and transforms 3.7 Mask R-CNN or 8.7 Faster R-CNN images/s at short side 800
    (benchmarks/rcnn_input.py), and a GPU takes 6-12 (assumed: no GPU here); 11 workers of a p3dn/p4d rank's 12 vCPUs
    give 3.3x a 12 images/s GPU's need for Mask R-CNN, where the earlier fixed 4 gave 1.2x. Idle workers cost nothing:
    they wait once the prefetch queue is full."""
    if not gpu_count:
        return CPU_LOADER_WORKERS
    return max(1, cores // max(1, ranks_per_host) - 1)


# --num-workers (cli.py): DataLoader worker processes per rank, which pass their batches through /dev/shm.
LOADER_WORKERS = ("num-workers", default_loader_workers)

"""How the launcher starts the R-CNN programs (faster_rcnn, mask_rcnn): their launch rules, next to their code.

The launcher's planner loads this file by its path (sagemaker_mxnet_horovod.parse.launch_rules), so it stays standard
library only and self-contained. What a launch module may declare, each optional, is documented there
(LaunchRules) and in docs/launcher.md.
"""

# The GPU memory and engine settings the R-CNN blog and GluonCV's Horovod scripts tuned for V100s.
_GPU_MXNET = (
    ("MXNET_GPU_MEM_POOL_TYPE", "Round"),
    ("MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF", "28"),
    ("MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD", "999"),
    ("MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD", "25"),
    ("MXNET_GPU_COPY_NTHREADS", "1"),
    ("MXNET_OPTIMIZER_AGGREGATION_SIZE", "54"),
    ("MXNET_CUDNN_AUTOTUNE_DEFAULT", "0"),
)


def environment(program, gpu_count):
    """(variable, value, why) defaults for every rank of `program` on a host with `gpu_count` GPUs."""
    if not gpu_count:
        return []
    return [(name, value, f"tuned for {program} on GPUs") for name, value in _GPU_MXNET]


# `horovod=false` is the non-Horovod baseline: one process per host over all of its devices with MXNet's
# kvstore, so no MPI and one host only.
SINGLE_PROCESS_WHEN_FALSE = {"horovod": "one process over all devices with MXNet's kvstore"}

# --num-workers (cli.py): DataLoader worker processes per rank, which pass their batches through /dev/shm.
LOADER_WORKERS = ("num-workers", 4)

"""How the launcher starts every built-in program: the launch rules of the `kvstore` hyperparameter, which all
of them take through their shared skeleton (session.py), next to the code that reads it.

The launcher's planner loads this file by its path (sagemaker_mxnet_horovod.parse.launch_rules), so it stays
standard library only and self-contained; the programs import the same names to check their own arguments.
"""

HOROVOD = "horovod"
# MXNet's distributed kvstores: the launcher runs the job with MXNet's parameter servers (scheduler, servers,
# each rank a kvstore worker), as sagemaker_parameter_server_enabled=true does.
PARAMETER_SERVER_KVSTORES = ("dist_sync", "dist_device_sync", "dist_async")
# One process over all devices of one host, no MPI: MXNet's kvstores within a process.
SINGLE_PROCESS_KVSTORES = {
    "local": "one process over all devices of the host, gradients summed with MXNet's local kvstore (on the CPU)",
    "device": "one process over all devices of the host, gradients summed with MXNet's device kvstore (on the GPUs)",
}
KVSTORES = (HOROVOD, *PARAMETER_SERVER_KVSTORES, *SINGLE_PROCESS_KVSTORES)

PARAMETER_SERVER_WHEN = {"kvstore": PARAMETER_SERVER_KVSTORES}
SINGLE_PROCESS_WHEN = {"kvstore": SINGLE_PROCESS_KVSTORES}

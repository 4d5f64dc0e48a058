"""Prototype, not shipped: Horovod's Gloo controller and CPU allreduce for ranks that mpirun starts.

Installed as a .pth hook in a throwaway image (benchmarks/probes/prototypes/Dockerfile); active when the job's
environment has PROTO_GLOO=1. Each rank sets the variables horovodrun would set for Gloo from Open MPI's own
(one host = one block of local ranks, as the launcher maps them); rank 0 serves Horovod's own HTTP rendezvous
store, the others wait until it listens. Used for docs/benchmarks.md ("A second tuning session").
"""

import json
import os
import socket
import threading
import time

PORT = 29999
RANK_ENV = "/run/sagemaker-cluster/rank-env.json"  # workers' ranks get the job's environment from here


def _job_env() -> dict:
    try:
        with open(RANK_ENV) as f:
            return json.load(f)
    except OSError:
        return {}


def _serve_rendezvous(size: int, local_size: int) -> None:
    from horovod.runner.common.util.hosts import SlotInfo
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    server = RendezvousHTTPServer(("0.0.0.0", PORT), RendezvousHandler, 0)
    server.init([SlotInfo(hostname=f"host{r // local_size}", rank=r, local_rank=r % local_size,
                          cross_rank=r // local_size, size=size, local_size=local_size,
                          cross_size=size // local_size) for r in range(size)])
    threading.Thread(target=server.serve_forever, daemon=True).start()


def _wait_for(address: str, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            socket.create_connection((address, PORT), timeout=2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"proto_gloo: no rendezvous at {address}:{PORT} after {deadline_s} s") from None
            time.sleep(0.05)


def setup() -> None:
    if "OMPI_COMM_WORLD_RANK" not in os.environ or _job_env().get("PROTO_GLOO", os.environ.get("PROTO_GLOO")) != "1":
        return
    rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    local_rank, local_size = int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]), int(os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"])
    address = "algo-1"
    os.environ.update(HOROVOD_RANK=str(rank), HOROVOD_SIZE=str(size), HOROVOD_LOCAL_RANK=str(local_rank),
                      HOROVOD_LOCAL_SIZE=str(local_size), HOROVOD_CROSS_RANK=str(rank // local_size),
                      HOROVOD_CROSS_SIZE=str(size // local_size), HOROVOD_HOSTNAME=f"host{rank // local_size}",
                      HOROVOD_CONTROLLER="gloo", HOROVOD_CPU_OPERATIONS="gloo", HOROVOD_GLOO_IFACE="eth0",
                      HOROVOD_GLOO_RENDEZVOUS_ADDR=address, HOROVOD_GLOO_RENDEZVOUS_PORT=str(PORT))
    if rank == 0:
        _serve_rendezvous(size, local_size)
    else:
        _wait_for(address)


setup()

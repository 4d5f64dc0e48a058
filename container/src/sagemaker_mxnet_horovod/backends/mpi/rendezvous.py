"""The MPI master's Gloo rendezvous (backends/mpi/gloo.py plans it): Horovod's own HTTP rendezvous server, as
horovodrun --gloo serves it, with the table of ranks gloo_ranks.py gives each rank, served in a thread from
before mpirun until after it ends. Horovod's runner is imported here only: planning needs none of it.
"""

from __future__ import annotations

import threading

from sagemaker_mxnet_horovod.backends.mpi.gloo_ranks import horovod_rank_variables
from sagemaker_mxnet_horovod.core.log import log


class RendezvousError(Exception):
    """The rendezvous could not start (its port taken): the job cannot run."""


def rank_table(size: int, local_size: int) -> list[dict[str, str]]:
    """Every rank's variables, in rank order, as each rank sets them (ranks placed by slot, local_size per host)."""
    return [horovod_rank_variables(rank, size, rank % local_size, local_size) for rank in range(size)]


class Rendezvous:
    """Serving from construction until close()."""

    def __init__(self, bind_address: str, port: int, size: int, local_size: int):
        from horovod.runner.common.util.hosts import SlotInfo
        from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

        try:
            self.server = RendezvousHTTPServer((bind_address, port), RendezvousHandler, 0)
        except OSError as error:
            raise RendezvousError(f"Horovod's Gloo rendezvous cannot listen on {bind_address or '*'}:{port}: "
                                  f"{error.strerror or error} (HOROVOD_GLOO_RENDEZVOUS_PORT in the job's environment "
                                  "chooses another port)") from error
        self.server.init([SlotInfo(hostname=v["HOROVOD_HOSTNAME"], rank=int(v["HOROVOD_RANK"]),
                                   local_rank=int(v["HOROVOD_LOCAL_RANK"]), cross_rank=int(v["HOROVOD_CROSS_RANK"]),
                                   size=int(v["HOROVOD_SIZE"]), local_size=int(v["HOROVOD_LOCAL_SIZE"]),
                                   cross_size=int(v["HOROVOD_CROSS_SIZE"])) for v in rank_table(size, local_size)])
        self.thread = threading.Thread(target=self.server.serve_forever, name="gloo-rendezvous", daemon=True)
        self.thread.start()
        log(f"Horovod's Gloo rendezvous serving {size} rank(s) on {bind_address or '*'}:{port}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

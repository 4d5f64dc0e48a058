"""The MPI master's Gloo rendezvous (backends/mpi/gloo.py plans it): Horovod's own HTTP rendezvous server, as
horovodrun --gloo serves it, with the table of ranks gloo_ranks.py gives each rank, served in a thread from
before mpirun until after it ends. Horovod's runner is imported here only: planning needs none of it.

Anyone on the job's network can reach its port, and Horovod's store believes whoever writes to it: a rank's address
written there by anyone else is where the others connect. So it answers the job's hosts only, as the launcher's
check-in service does (act/cluster/master.py): a connection from any other address is closed unanswered, and logged
once (JobHosts). The job's hosts are this host and each worker at the address it checked in from, which the master
verified against the worker's name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection

from sagemaker_mxnet_horovod.backends.mpi.gloo_ranks import horovod_rank_variables
from sagemaker_mxnet_horovod.core.log import log

LOOPBACK = "127.0.0.1"  # this host's own ranks, on one host


class RendezvousError(Exception):
    """The rendezvous could not start (its port taken): the job cannot run."""


def rank_table(size: int, local_size: int) -> list[dict[str, str]]:
    """Every rank's variables, in rank order, as each rank sets them (ranks placed by slot, local_size per host)."""
    return [horovod_rank_variables(rank, size, rank % local_size, local_size) for rank in range(size)]


class JobHosts:
    """Which connections the rendezvous answers: from the job's hosts' addresses only. Anything else is logged once
    per address, and answered nothing."""

    def __init__(self, addresses: Collection[str], log: Callable[[str], None] = log):
        self.addresses, self.log = frozenset(addresses) | {LOOPBACK}, log
        self.ignored: set[str] = set()
        self.lock = threading.Lock()

    def admits(self, address: str) -> bool:
        if address in self.addresses:
            return True
        with self.lock:
            first = address not in self.ignored
            self.ignored.add(address)
        if first:
            self.log(f"ignored a connection to Horovod's Gloo rendezvous from {address}: not a host of this job "
                     f"({', '.join(sorted(self.addresses))})")
        return False


def job_only_server(address: tuple[str, int], hosts: JobHosts):
    """Horovod's rendezvous server (its store, its handler), answering the job's hosts only."""
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    class JobOnlyServer(RendezvousHTTPServer):
        def verify_request(self, request, client_address) -> bool:  # socketserver closes what it refuses, unread
            return hosts.admits(client_address[0])

    return JobOnlyServer(address, RendezvousHandler, 0)


class Rendezvous:
    """Serving from construction until close(), to the job's hosts (addresses, this host's loopback too)."""

    def __init__(self, bind_address: str, port: int, size: int, local_size: int, addresses: Collection[str]):
        from horovod.runner.common.util.hosts import SlotInfo

        self.hosts = JobHosts(addresses)
        try:
            self.server = job_only_server((bind_address, port), self.hosts)
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
        log(f"Horovod's Gloo rendezvous serving {size} rank(s) on {bind_address or '*'}:{port}, to "
            f"{', '.join(sorted(self.hosts.addresses))} only")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

"""A worker host of an MPI job: run sshd for the master's mpirun, check in, and end as the job ended on the
master. A stop (core/stop.py) reaches this host's ranks, to checkpoint, and the worker waits for the master's
verdict. SIGUSR1 (`train stacks`) asks the master for every rank's stacks, which it then asks of every host, this
one included (stacks.py); a worker that loses its master writes its own."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sagemaker_mxnet_horovod.act import stacks
from sagemaker_mxnet_horovod.act.cluster.ssh import Sshd
from sagemaker_mxnet_horovod.act.cluster.worker import HostDiagnostics, serve_master
from sagemaker_mxnet_horovod.act.local_ranks import signal_local_ranks
from sagemaker_mxnet_horovod.core import stop
from sagemaker_mxnet_horovod.core.exits import ClusterError
from sagemaker_mxnet_horovod.core.failure import Failure
from sagemaker_mxnet_horovod.core.log import log
from sagemaker_mxnet_horovod.core.outcome import Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.parse.paths import Paths


def run_worker(plan: Plan, paths: Paths, bind_address: str) -> Outcome:
    stop_requested = threading.Event()

    def on_stop(signum: int) -> None:
        # SageMaker stops every host at once: let this host's ranks checkpoint, then wait for the master.
        signal_local_ranks(signum)
        stop_requested.set()

    stop.listen(on_stop)
    host = plan.current_host

    def local_stacks(dump: str, reason: str) -> dict[int, str]:
        return stacks.dump_host(plan.run_dir, plan.output_data_dir, host, reason, dump)

    # Asked for stacks here (SIGUSR1, a rank's progress watch): the master asks every host, this one included.
    diagnostics = HostDiagnostics(local_stacks=local_stacks)
    stacks.serve_requests(plan.run_dir, diagnostics.stacks_wanted.put, log)
    sshd = Sshd(Path(plan.run_dir), bind_address or None)
    try:
        outcome = serve_master(plan.master_host, plan.handshake_port, host, sshd,
                               time.monotonic() + plan.peer_timeout_s, stop_requested, paths.failure_file, diagnostics)
    except ClusterError as error:
        return Outcome(Failure(f"worker {host}: {error}", host=host))
    finally:
        sshd.stop()
    if outcome.lost_master:  # a hang watch of the worker's own: this host's ranks may still run
        stacks.dump_host(plan.run_dir, plan.output_data_dir, host, f"worker {host} lost the master {plan.master_host}")
    if outcome.exit_code:
        return Outcome(Failure(f"worker {host}: {outcome.failure}", outcome.exit_code, host=host),
                       ((plan.master_host, outcome.master_user_failure),))
    log(f"job finished on {plan.master_host}; worker {host} done")
    return Outcome()

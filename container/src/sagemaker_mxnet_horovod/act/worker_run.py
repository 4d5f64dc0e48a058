"""A worker host of an MPI job: run sshd for the master's mpirun, check in, and end as the job ended on the
master. SIGTERM before the job starts ends it at once; after, this host's ranks get it to checkpoint and the
worker waits for the master's verdict. SIGUSR1 (`train stacks`) asks the master for every rank's stacks, which
it then asks of every host, this one included (stacks.py); a worker that loses its master writes its own."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from sagemaker_mxnet_horovod.act import stacks
from sagemaker_mxnet_horovod.act.cluster.ssh import Sshd
from sagemaker_mxnet_horovod.act.cluster.worker import HostDiagnostics, serve_master
from sagemaker_mxnet_horovod.act.local_ranks import signal_local_ranks
from sagemaker_mxnet_horovod.core.exits import EXIT_STOPPED, ClusterError, StopRequested
from sagemaker_mxnet_horovod.core.failure import Failure
from sagemaker_mxnet_horovod.core.log import log
from sagemaker_mxnet_horovod.core.outcome import Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.parse.paths import Paths


def dump_local_stacks(plan: Plan, paths: Paths, reason: str, dump: str | None = None) -> dict[int, str]:
    """This host's ranks' stacks, into its log and its output/data/stacks/<dump>/; returned for the master.
    dump: the master's name for it (every host's files of one dump share it)."""
    dump = dump if dump and stacks.is_dump_name(dump) else stacks.dump_name(reason)
    found = stacks.collect_local(plan.run_dir, dump)
    stacks.write_dump(paths.output_data_dir / "stacks", dump, {plan.current_host: found}, reason, log)
    return found


def run_worker(plan: Plan, paths: Paths, bind_address: str) -> Outcome:
    stop_requested = threading.Event()
    ready = threading.Event()

    def on_signal(signum, _frame):
        if not ready.is_set():
            raise StopRequested(signal.Signals(signum).name)
        # SageMaker stops every host at once: let this host's ranks checkpoint, then wait for the master.
        signal_local_ranks(signum)
        stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # Asked for stacks here (SIGUSR1, a rank's progress watch): the master asks every host, this one included.
    diagnostics = HostDiagnostics(local_stacks=lambda dump, reason: dump_local_stacks(plan, paths, reason, dump))
    stacks.serve_requests(plan.run_dir, diagnostics.stacks_wanted.put, log)
    host = plan.current_host
    sshd = Sshd(Path(plan.run_dir), bind_address or None)
    try:
        ready.set()  # from here the worker waits for the master's verdict even when stopped
        outcome = serve_master(plan.master_host, plan.handshake_port, host, sshd,
                               time.monotonic() + plan.peer_timeout_s, stop_requested, paths.failure_file, diagnostics)
    except ClusterError as error:
        return Outcome(Failure(f"worker {host}: {error}", host=host))
    except StopRequested as stop:
        return Outcome(Failure(f"worker {host} stopped by {stop} before the job started", EXIT_STOPPED, host=host))
    finally:
        sshd.stop()
    if outcome.lost_master:  # a hang watch of the worker's own: this host's ranks may still run
        dump_local_stacks(plan, paths, f"worker {host} lost the master {plan.master_host}")
    if outcome.exit_code:
        return Outcome(Failure(f"worker {host}: {outcome.failure}", outcome.exit_code, host=host),
                       ((plan.master_host, outcome.master_user_failure),))
    log(f"job finished on {plan.master_host}; worker {host} done")
    return Outcome()

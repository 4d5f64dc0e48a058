"""The MPI master's run: the job's command (mpirun) run as act/command_run.py runs a command, between two steps of
its own: gather the workers (each checked in, its sshd up with the job's key) and release them with the outcome.
While mpirun runs, the cluster's watches end a job it alone would leave hanging: a worker lost, an MPI daemon that
never started or died, and a stop reaches every host. Without workers (MPI on one host) it is the command run.
When the job asks for Horovod's Gloo (gloo.py), the master serves its rendezvous around mpirun (rendezvous.py), to
the job's hosts only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path

from sagemaker_mxnet_horovod.act.cluster.master import Master
from sagemaker_mxnet_horovod.act.cluster.network import ipv4_addresses
from sagemaker_mxnet_horovod.act.cluster.ssh import generate_key
from sagemaker_mxnet_horovod.act.command_run import CommandRun
from sagemaker_mxnet_horovod.act.outcome_files import read_user_failure
from sagemaker_mxnet_horovod.backends.mpi.output import MPIRUN
from sagemaker_mxnet_horovod.core.exits import EXIT_FAILED, ClusterError, StopRequested
from sagemaker_mxnet_horovod.core.failure import Failure
from sagemaker_mxnet_horovod.core.log import log
from sagemaker_mxnet_horovod.core.outcome import Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.core.stop import stopped
from sagemaker_mxnet_horovod.parse.settings import KEYS

DAEMON_EXIT_GRACE_S = 15.0  # after a worker's MPI daemon exits, how long mpirun may take to end the job


class MasterRun(CommandRun):
    def __init__(self, plan: Plan, env: Mapping[str, str], bind_address: str, failure_file: Path):
        super().__init__(plan, env, failure_file, MPIRUN)
        self.cluster = (Master(plan.workers, plan.handshake_port, bind_address, Path(plan.run_dir),
                               deadline=time.monotonic() + plan.peer_timeout_s) if plan.workers else None)

    def run(self) -> Outcome:
        failure = self.gather() if self.cluster else None
        if failure is None:
            failure = self.run_command()
            if self.cluster:
                self.release(failure)
        return Outcome(failure, tuple(sorted(self.cluster.user_failures.items())) if self.cluster else ())

    def run_command(self) -> Failure | None:
        """mpirun, with Horovod's Gloo rendezvous served around it when the plan has one (gloo.py)."""
        rendezvous, planned = None, self.plan.gloo_rendezvous
        if planned is not None:
            from sagemaker_mxnet_horovod.backends.mpi.rendezvous import Rendezvous, RendezvousError

            try:
                rendezvous = Rendezvous(planned.bind_address, planned.port, planned.size, planned.local_size,
                                        self.job_addresses())
            except RendezvousError as error:
                return Failure(f"{error} on master {self.plan.current_host}", EXIT_FAILED,
                               host=self.plan.current_host)
        try:
            self.start()
            return self.diagnose(self.wait())
        finally:
            if rendezvous:
                rendezvous.close()

    def job_addresses(self) -> set[str]:
        """Where the job's ranks reach the master from (rendezvous.py answers them only): this host, by its cluster
        address and what its name resolves to, and each worker from the address it checked in from, which the
        check-in verified against its name (act/cluster/master.py)."""
        own = {self.plan.gloo_rendezvous.bind_address} - {""}
        try:
            own |= set(ipv4_addresses(self.plan.master_host))
        except OSError:
            pass  # one host: loopback (the rendezvous admits it); across hosts the cluster address
        workers = {link.connection.peer for link in self.cluster.links.values()} if self.cluster else set()
        return own | workers

    def ask_workers(self):
        return self.cluster.ask_workers if self.cluster else None

    def gather(self) -> Failure | None:
        """Every worker checked in, its sshd up with the job's key."""
        started = time.monotonic()
        key = generate_key(Path(self.plan.run_dir) / "id_ed25519")
        try:
            # No separate ssh check: it cost a round trip per job, and mpirun's own ssh error, when there is
            # one, becomes the first line of the failure file.
            self.cluster.gather(key)
        except ClusterError as error:
            message = f"cluster setup failed on master {self.plan.current_host}: {error}"
            self.cluster.finish(EXIT_FAILED, message)
            return Failure(message, EXIT_FAILED, host=self.plan.current_host)
        except StopRequested as stop:
            failure = stopped(stop.signum, "the job had not started: the master was waiting for its workers",
                              host=self.plan.current_host)
            self.cluster.finish(failure.exit_code, failure.render())
            return failure
        log(f"{len(self.plan.workers)} worker(s) ready in {time.monotonic() - started:.2f} s")
        return None

    def on_stop(self, signum: int) -> None:
        super().on_stop(signum)
        if self.cluster:  # the workers pass it to their ranks, when only the master was signalled
            self.cluster.broadcast_stop(signum)

    def start(self) -> None:
        """mpirun, with the watches on the workers armed."""
        cluster = self.cluster
        if cluster:
            cluster.on_worker_lost = lambda host, how: self.job.abort(f"worker {host} {how}")
            cluster.on_daemon_exited = self.on_daemon_exited
            cluster.on_stacks_wanted = self.stacks.dump_later
        super().start()
        if cluster:
            threading.Thread(target=self.watch_launch, daemon=True).start()

    def release(self, failure: Failure | None) -> None:
        """Tell every worker the outcome; each answers with what its user's program wrote to its failure file."""
        released = time.monotonic()
        code = failure.exit_code if failure else 0
        self.cluster.finish(code, failure.render() if failure else None,
                            user_failure=read_user_failure(self.failure_file) if code else None)
        log(f"{len(self.plan.workers)} worker(s) released in {time.monotonic() - released:.2f} s")

    # -----------------------------------------------------------------------------------------------------
    # Watches: the launcher ends a job that mpirun alone would leave hanging.

    def on_daemon_exited(self, host: str) -> None:
        # At the job's end mpirun exits within moments of its daemons; one that died mid-job leaves mpirun
        # waiting forever.
        self.job.abort_later(DAEMON_EXIT_GRACE_S, f"mpirun's daemon on {host} exited and mpirun was still waiting "
                             f"for it {DAEMON_EXIT_GRACE_S:g} s later: orted died there without mpirun noticing")

    def watch_launch(self) -> None:
        timeout = self.plan.peer_timeout_s
        missing = self.cluster.wait_launched(self.started + timeout)
        if missing:
            self.job.abort(f"mpirun started no MPI daemon on {', '.join(missing)} within {timeout:g} s "
                           f"({KEYS.peer_timeout_s}): ssh or orted failed there without mpirun noticing")

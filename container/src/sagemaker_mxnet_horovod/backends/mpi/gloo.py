"""Horovod's Gloo under the MPI backend, when the job's environment asks for it (HOROVOD_CONTROLLER=gloo or
HOROVOD_CPU_OPERATIONS=gloo, as users of `horovodrun --gloo` set them): the plan's part, pure.

Horovod 0.28.1 started by mpirun cannot use Gloo on its own: with HOROVOD_CPU_OPERATIONS=gloo it builds its Gloo
context from MPI but never the process set's, and every rank crashes (SIGSEGV in GlooAlgorithms::Broadcast);
with HOROVOD_CONTROLLER=gloo it fails in MPI_Comm_size (docs/benchmarks/horovod-tuning.md). What works is what
horovodrun --gloo sets up: both knobs gloo, Gloo's interface, Horovod's HTTP rendezvous and each rank's own
numbers. mpirun still starts the ranks; rank_env.py gives each its numbers (gloo_ranks.py) and the master serves
the rendezvous for the job's duration (rendezvous.py). Opt-in: docs/launcher.md#horovods-gloo.
"""

from __future__ import annotations

from collections.abc import Mapping

from sagemaker_mxnet_horovod.core.exits import PlanError
from sagemaker_mxnet_horovod.core.plan import GlooRendezvous
from sagemaker_mxnet_horovod.parse.settings import KEYS
from sagemaker_mxnet_horovod.plan.env_rules import PlanInputs, Setting

CONTROLLER, CPU_OPERATIONS = "HOROVOD_CONTROLLER", "HOROVOD_CPU_OPERATIONS"
GLOO = "gloo"  # Horovod compares the value without case (strcasecmp)
RENDEZVOUS_ADDR, RENDEZVOUS_PORT = "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT"
IFACE = "HOROVOD_GLOO_IFACE"
# Fixed, because the plan (and `train --dry-run`) gives every rank its value before anything runs. Next to the
# launcher's check-in port (the handshake port, 7420), below Linux's ephemeral range (32768-60999) so no outgoing
# connection of the job's (Open MPI's, Gloo's, NCCL's) can hold it, and not Horovod's or Open MPI's own.
# HOROVOD_GLOO_RENDEZVOUS_PORT in the job's environment replaces it.
DEFAULT_RENDEZVOUS_PORT = 7421
LOOPBACK = "127.0.0.1"  # one host: the rendezvous and Gloo's transport never leave it


def asks_for_gloo(env: Mapping[str, str], name: str) -> bool:
    """The variable is set to gloo, in any case, as Horovod reads it."""
    return env.get(name, "").strip().lower() == GLOO


def asks(env: Mapping[str, str]) -> bool:
    """The job's environment asks for Gloo: either knob is gloo, in any case, as Horovod reads them."""
    return asks_for_gloo(env, CONTROLLER) or asks_for_gloo(env, CPU_OPERATIONS)


def rendezvous(job: PlanInputs) -> GlooRendezvous | None:
    """Whether the job runs Horovod over Gloo, decided here once for the whole plan (its rule, its hint, the master's
    rendezvous, each rank's numbers): the rendezvous the master serves, or None. Refused when one knob asks for Gloo
    and the other says otherwise (MPI's controller with Gloo's operations is the crash above), or when the user's
    port is no port."""
    env = job.user_env  # what reaches Horovod in the ranks: the job's environment, and the custom MPI options' -x
    if not asks(env):
        return None
    for name in (CONTROLLER, CPU_OPERATIONS):
        if env.get(name) and not asks_for_gloo(env, name):
            asked = CONTROLLER if name == CPU_OPERATIONS else CPU_OPERATIONS
            raise PlanError(f"{asked}={env[asked]} but {name}={env[name]}: under this image's mpirun, Horovod's Gloo "
                            f"works for both or neither (remove {name}, or set it to gloo)")
    port = env.get(RENDEZVOUS_PORT)
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise PlanError(f"{RENDEZVOUS_PORT}={port} in the job's environment: not a TCP port (1-65535)")
    layout = job.layout
    bind_address = job.facts.address_of(layout.interface) if len(layout.hosts) > 1 else LOOPBACK
    return GlooRendezvous(int(port) if port else DEFAULT_RENDEZVOUS_PORT, bind_address, layout.total_processes,
                          layout.processes_per_host)


def horovod_gloo(job: PlanInputs) -> list[Setting | str]:
    """Both knobs gloo, Gloo's interface and the rendezvous the master serves, when the job runs over Gloo."""
    if rendezvous(job) is None:
        return []
    layout = job.layout
    multi_host = len(layout.hosts) > 1
    why = ("the job's environment asks for Horovod's Gloo; under mpirun it works for both, with the rendezvous "
           "the launcher serves")
    return [
        Setting(CONTROLLER, GLOO, why),
        Setting(CPU_OPERATIONS, GLOO, why),
        Setting(IFACE, layout.interface if multi_host else "lo",
                "Gloo's transport on the cluster interface" if multi_host else "one host: Gloo over loopback"),
        Setting(RENDEZVOUS_ADDR, layout.master_host if multi_host else LOOPBACK,
                "the master serves Horovod's Gloo rendezvous" + ("" if multi_host else " on loopback"),
                required=True),
        Setting(RENDEZVOUS_PORT, str(DEFAULT_RENDEZVOUS_PORT),
                f"the rendezvous's port: fixed, below the ephemeral range, next to {KEYS.handshake_port}"),
        "Horovod's Gloo: mpirun starts the ranks, each gets its own HOROVOD_RANK, _SIZE, _LOCAL_*, _CROSS_* from "
        "Open MPI's numbers (backends/mpi/gloo_ranks.py); opt-in (docs/launcher.md#horovods-gloo)",
    ]


RULES = (horovod_gloo,)

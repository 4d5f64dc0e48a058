"""The plan as data: what planning (plan/) hands to acting (act/, backends/) and to the diagnosis, and its parts.
Only data here: how each part is decided is the planner's (plan/job_plan.py composes it), what it means in words
is the start log's and the diagnosis's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Program:
    name: str
    argv: tuple[str, ...]  # the program and its arguments, as each rank runs it
    builtin: bool
    submit_directory: str | None = None  # local dir or s3:// tarball to fetch into code_dir first
    code_dir: str | None = None
    kind: str = "script"  # a user's entry point: "script" (python FILE), "package" (python -m) or "command"
    # The image's packages its requirements.txt may replace (canonical names; "all": every one)
    requirements_replace: frozenset[str] = frozenset()


@dataclass(frozen=True)
class LocalProcess:
    """One process this host runs, and what it is."""

    name: str  # its role and job-wide index, as failures name it: "scheduler", "server 1", "worker 3"
    role: str  # scheduler | server | worker (DMLC_ROLE)
    argv: tuple[str, ...]
    env: Mapping[str, str]  # its own variables, on top of the host's rank environment
    cwd: str  # the code directory, for every role


@dataclass(frozen=True)
class StrayOutput:
    """A file the job is told to write under /opt/ml/output, where SageMaker does not upload it (plan/stray_outputs.py)."""

    variable: str
    path: str  # where the job writes it
    copy_to: str  # where SageMaker uploads it from


@dataclass(frozen=True)
class ShmBudget:
    """This host's /dev/shm against the job's estimated need (diagnose/shm.py estimates it and says what it means)."""

    size_bytes: int | None  # None: no /dev/shm here
    need_bytes: int
    parts: tuple[str, ...]  # what the need is made of, for people
    loader_key: str | None = None  # the argument that sets the data-loader workers, when there are any
    gpus: int = 0
    free_bytes: int | None = None  # free of it at the start (None: not measured, all of it counts)

    @property
    def available_bytes(self) -> int | None:
        """What the job can use: the free part, not the size, of a /dev/shm others fill too."""
        return self.size_bytes if self.free_bytes is None else self.free_bytes

    @property
    def short(self) -> bool:
        return self.available_bytes is not None and self.available_bytes < self.need_bytes


@dataclass(frozen=True)
class GlooRendezvous:
    """Horovod's Gloo rendezvous, when the job runs Horovod over Gloo under mpirun (backends/mpi/gloo.py decides it,
    once, in the plan): the master serves it (backends/mpi/rendezvous.py), and each rank, told by this host's
    rank-env file, gets its own numbers for it (backends/mpi/rank_env.py)."""

    port: int  # where the master serves it: HOROVOD_GLOO_RENDEZVOUS_PORT, the user's or the launcher's
    bind_address: str  # where the master listens: loopback on one host, else its cluster address ("": all)
    size: int  # the job's ranks
    local_size: int  # the ranks of each host


@dataclass(frozen=True)
class Plan:
    """This host's part of the job: what it runs, with which environment, and what the diagnosis needs to know."""

    backend: str  # what runs it: a backend's name (backends/registry.py, the one place a name becomes a backend)
    # "single": run the program here; "master": run mpirun, or coordinate the parameter-server job; "worker":
    # serve the master's mpirun, or run this host's parameter-server processes
    role: str
    current_host: str
    master_host: str
    hosts: tuple[str, ...]
    processes_per_host: int
    total_processes: int
    interface: str | None
    program: Program
    command: tuple[str, ...]  # what this host executes: mpirun ... or the program; empty on MPI workers
    # Variables to set on top of the container's environment: the backend's options' (MPI's -x), SM_*, the defaults
    env: Mapping[str, str]
    rank_env: Mapping[str, str]  # this host's SM_* values, given to each local rank (act/rank_program.rank_environment)
    rank_hosts: tuple[str, ...]  # host of each rank (a parameter-server job: of each worker), for naming it
    peer_timeout_s: float
    handshake_port: int
    run_dir: str
    notes: tuple[str, ...] = field(default=())
    role_reason: str = ""  # why this role, when it is not obvious (a host outside the distribution groups)
    stray_outputs: tuple[StrayOutput, ...] = ()  # copied into output/data when the job ends
    processes: tuple[LocalProcess, ...] = ()  # a parameter-server host's own processes, instead of `command`
    backend_summary: str = ""  # the job's processes as its backend counts them, for the start log: "2 processes, MPI"
    backend_lines: tuple[str, ...] = ()  # the backend's own lines for the start log (where its roles run)
    shm: ShmBudget | None = None  # this host's /dev/shm against the job's need, for the diagnosis
    # output/data: each rank's log (logs/<host>-rank-<rank>.log) and stacks (stacks/) go there ("": nowhere)
    output_data_dir: str = ""
    console_ranks: frozenset[int] | None = None  # the ranks whose output reaches the console; None: all
    gloo_rendezvous: GlooRendezvous | None = None  # Horovod over Gloo under mpirun: the rendezvous; None: no Gloo

    @property
    def workers(self) -> tuple[str, ...]:
        """The hosts that check in with the master: every host of the job but the first (none for one host)."""
        return self.hosts[1:]

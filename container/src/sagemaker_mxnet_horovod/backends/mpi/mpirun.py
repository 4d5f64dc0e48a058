"""The MPI backend's plan (Horovod over Open MPI): the master's mpirun command, as data (its -mca parameters, why
each: docs/launcher.md, "The mpirun command"; the variables it exports to every rank; the user's own options), and
the environment rules of MPI jobs. Workers run no command: mpirun reaches them over ssh (act/cluster)."""

from __future__ import annotations

from collections.abc import Mapping

from sagemaker_mxnet_horovod.backends.mpi import gloo
from sagemaker_mxnet_horovod.parse.mpi_options import MpiOptions
from sagemaker_mxnet_horovod.plan.backend import HostInputs, HostPlan
from sagemaker_mxnet_horovod.plan.cores import CoreShare, core_share
from sagemaker_mxnet_horovod.plan.env_rules import PlanInputs, Rule, Setting

# Open MPI busy-polls one core per rank while it waits; below this many cores per rank that steals a large
# share of the compute (measured on 2 cores: Mask R-CNN 59 s/iter busy-polling vs 19 s/iter yielding; MNIST,
# 2 hosts x 1 core per rank, 0.52-0.65 of the no-MPI control busy-polling vs 0.86-1.02 yielding, Horovod's
# background thread 39 vs 8-12 ms of CPU per step: benchmarks/horovod_tuning.py, docs/benchmarks/horovod-tuning.md).
# Horovod's cycle time, engine type and Gloo were measured too and are left at Horovod's defaults (same page).
YIELD_WHEN_CORES_PER_RANK_BELOW = 5

# Environment the ranks on other hosts need: sshd starts orted with a clean environment.
EXPORTED_NAMES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONUNBUFFERED", "LANG", "LC_ALL",
                  "OMP_NUM_THREADS", "TRAINING_JOB_NAME", "TRAINING_JOB_ARN")
EXPORTED_PREFIXES = ("SM_", "MXNET_", "HOROVOD_", "NCCL_", "FI_", "AWS_", "SMMH_")


def ssh_options(run_dir: str) -> list[str]:
    """ssh client options from the master to the workers: the job's key, strict checking of pinned host keys."""
    return [
        "-o", f"IdentityFile={run_dir}/id_ed25519",
        "-o", f"UserKnownHostsFile={run_dir}/known_hosts",
        "-o", "StrictHostKeyChecking=yes",
        "-o", "BatchMode=yes",
        "-o", "ConnectTimeout=10",
        "-o", "LogLevel=ERROR",
        # OpenSSH 9's default key exchange (post-quantum hybrid) costs ~0.1 s more per connection than
        # curve25519 (measured here); the session only starts orted inside the job's own network.
        "-o", "KexAlgorithms=curve25519-sha256,curve25519-sha256@libssh.org",
    ]


def mpi_params(interface: str | None, yield_when_idle: bool, run_dir: str | None) -> list[tuple[str, str]]:
    """The -mca parameters, in order."""
    params = [
        ("pml", "ob1"),  # TCP/shared memory; no UCX/openib probing on hosts without InfiniBand
        # The libfabric BTL costs ~0.5 s in MPI_Init and 1 s in MPI_Finalize per job across hosts (measured
        # here). It is off on EFA hosts too: pml ob1 with the ofi BTL over EFA was never run here, and AWS's
        # own MPI-over-EFA path is pml cm with the ofi MTL; TCP is what every host is known to work with.
        ("btl", "^openib,ofi"),
        ("btl_vader_single_copy_mechanism", "none"),  # containers lack CAP_SYS_PTRACE for CMA
        ("plm_rsh_no_tree_spawn", "1"),  # only the master holds the cluster key
        ("orte_abort_on_non_zero_status", "1"),  # one failed rank ends the job instead of hanging it
    ]
    if interface:
        params += [("btl_tcp_if_include", interface), ("oob_tcp_if_include", interface)]
    if run_dir:
        params.append(("plm_rsh_args", " ".join(ssh_options(run_dir))))
    if yield_when_idle:
        params.append(("mpi_yield_when_idle", "1"))
    return params


def user_sets_mca(name: str, custom: MpiOptions, base_env: Mapping[str, str]) -> bool:
    """The user chose this -mca parameter (OMPI_MCA_<name>, or -mca in sagemaker_mpi_custom_mpi_options): theirs
    replaces ours."""
    return f"OMPI_MCA_{name}" in base_env or custom.sets_mca(name)


def yields_when_idle(cores_per_rank: int, custom: MpiOptions, base_env: Mapping[str, str]) -> bool:
    """mpi_yield_when_idle=1 when busy polling would starve the ranks (cores_per_rank: plan/cores.py counts the
    hosts sharing the machine too), unless the user set it."""
    return (cores_per_rank < YIELD_WHEN_CORES_PER_RANK_BELOW
            and not user_sets_mca("mpi_yield_when_idle", custom, base_env))


def exported_names(env: Mapping[str, str]) -> list[str]:
    return sorted(n for n in env if n in EXPORTED_NAMES or n.startswith(EXPORTED_PREFIXES))


def build_mpirun_command(
    hosts: tuple[str, ...],
    local_name: str,
    processes_per_host: int,
    params: list[tuple[str, str]],
    exported: list[str],
    custom_options: tuple[str, ...],
    rank_argv: tuple[str, ...],
) -> tuple[str, ...]:
    # Open MPI starts ranks locally only for its own hostname; the config's name for this host (algo-1)
    # is not it in SDK local mode (the hostname is the container id), so name the master's slots by it.
    slots = [f"{local_name if i == 0 else h}:{processes_per_host}" for i, h in enumerate(hosts)]
    argv = ["mpirun", "--allow-run-as-root", "--tag-output", "--host", ",".join(slots),
            "-np", str(len(hosts) * processes_per_host),
            "-bind-to", "none", "-map-by", "slot"]
    for name, value in params:
        argv += ["-mca", name, value]
    for name in exported:
        argv += ["-x", name]
    argv += list(custom_options)
    argv += list(rank_argv)
    return tuple(argv)


def mpirun_command(hosts: tuple[str, ...], local_name: str, processes_per_host: int, cores_per_rank: int,
                   interface: str | None, run_dir: str, custom_options: MpiOptions, base_env: Mapping[str, str],
                   env: Mapping[str, str], rank_argv: tuple[str, ...]) -> tuple[str, ...]:
    """The master's mpirun: interface and ssh parameters only across hosts; a parameter the user set replaces
    ours; every variable the ranks need exported (the container's and the plan's)."""
    multi_host = len(hosts) > 1
    yield_when_idle = yields_when_idle(cores_per_rank, custom_options, base_env)
    params = [(n, v) for n, v in mpi_params(interface if multi_host else None, yield_when_idle,
                                            run_dir if multi_host else None)
              if n == "mpi_yield_when_idle" or not user_sets_mca(n, custom_options, base_env)]
    exported = exported_names({**base_env, **env})
    return build_mpirun_command(hosts, local_name, processes_per_host, params, exported, custom_options.for_mpirun,
                                rank_argv)


def host_plan(inputs: HostInputs) -> HostPlan:
    """The master's mpirun; nothing on a worker, which mpirun reaches over ssh. The user's options on every host:
    the files their -x variables name are written on every host."""
    job = inputs.job
    layout, custom = job.layout, job.config.settings.custom_mpi_options
    exported = custom.exported_values({**job.base_env, **inputs.env})
    rendezvous = gloo.rendezvous(job)  # every host's ranks read it (rank_env.py), the master serves it
    if layout.role != "master":
        return HostPlan(rank_variables=exported, gloo_rendezvous=rendezvous)
    return HostPlan(mpirun_command(layout.hosts, job.facts.hostname, layout.processes_per_host,
                                   rank_cores(job).per_process, layout.interface, inputs.run_dir, custom, job.base_env,
                                   inputs.env, inputs.rank_argv), rank_variables=exported, gloo_rendezvous=rendezvous)


# ---------------------------------------------------------------------------------------------------------
# Environment rules of MPI jobs (after env_rules.RULES in the start log)

def rank_cores(job: PlanInputs) -> CoreShare:
    """This host's cores split between its ranks and those of the hosts sharing its machine (plan/cores.py)."""
    return core_share(job.facts, job.config.resource, job.layout.processes_per_host)


def omp_threads_per_rank(job: PlanInputs) -> list[Setting]:
    """One OpenMP thread per core a rank gets: more threads than cores spin in libgomp's waits."""
    share = rank_cores(job)
    return [Setting("OMP_NUM_THREADS", str(share.per_process), share.why)]


def mpi_yield_when_idle(job: PlanInputs) -> list[str]:
    """The note for mpirun's mpi_yield_when_idle (yields_when_idle decides it)."""
    share = rank_cores(job)
    if not yields_when_idle(share.per_process, job.config.settings.custom_mpi_options, job.base_env):
        return []
    return [f"mpi_yield_when_idle=1 ({share.per_process} core(s) per rank: {share.why}; "
            "busy polling would starve it)"]


def transport_shares_the_core(job: PlanInputs) -> list[str]:
    """The hint for one core per rank across hosts: the allreduce's transport needs that core too (measured on
    emulated links: docs/benchmarks/link-scaling.md#user-scripts)."""
    share = rank_cores(job)
    if len(job.layout.hosts) < 2 or share.per_process > 1:
        return []
    # Gloo's transport waits without spinning: on a slow link it gives such a script most of that back (0.65 ->
    # 0.73-0.75 at link ratio 0.77), but costs where the link is fast or the compute is on the CPU (same page).
    gloo_hint = "" if gloo.rendezvous(job) else (", or on a slow link try Horovod's Gloo "
                                               "(HOROVOD_CPU_OPERATIONS=gloo in the job's environment)")
    return [f"{share.per_process} core per rank across hosts: Horovod's allreduce over TCP needs that core too, and "
            "a script's work on the CPU each step (an optimizer update, Python) slows its transfers; keep per-step "
            f"work off the CPU, give each rank 2 cores or more{gloo_hint} "
            "(docs/benchmarks/link-scaling.md#user-scripts)"]


def nccl_socket_interface(job: PlanInputs) -> list[Setting]:
    if not job.layout.interface:
        return []
    return [Setting("NCCL_SOCKET_IFNAME", job.layout.interface, "the cluster interface")]


# NCCL's socket transport on hosts with 100 Gbps networking or more (ml.p3dn, p4d/p4de, g5/g6.48xlarge,
# g6e.24/48xlarge). These hosts have EFA, but this image cannot use it: NCCL needs the aws-ofi-nccl plugin,
# which neither PyPI nor Debian ships (Debian's libfabric1 has the EFA provider, the plugin is what is missing),
# so NCCL talks TCP there like everywhere else. One socket on one thread does not fill such a link: NCCL's
# documentation advises 4 helper threads "for generic 100G networks", and its own AWS auto-detection
# (ENA's PCI vendor id) opens 8 sockets per thread, a detection that fails where the container's eth0 is
# a virtual device with no PCI vendor to read. 4 x 8 = 32 sockets, within NCCL's limit of 64.
NCCL_100G_INSTANCE_TYPES = frozenset({
    "ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.g5.48xlarge", "ml.g6.48xlarge",
    "ml.g6e.24xlarge", "ml.g6e.48xlarge",
})
NCCL_100G_SOCKET_DEFAULTS = {"NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "8"}


def nccl_sockets_on_100g(job: PlanInputs) -> list[Setting]:
    instance_type = job.config.resource.current_instance_type
    if instance_type not in NCCL_100G_INSTANCE_TYPES:
        return []
    why = f"NCCL sockets on {instance_type}'s 100+ Gbps network (NCCL's documentation; no EFA plugin in this image)"
    return [Setting(name, value, why) for name, value in NCCL_100G_SOCKET_DEFAULTS.items()]


RULES: tuple[Rule, ...] = (
    omp_threads_per_rank,
    mpi_yield_when_idle,
    transport_shares_the_core,
    nccl_socket_interface,
    nccl_sockets_on_100g,
)

"""Plan: from a TrainingConfig and HostFacts to the exact argv and environment, as data.

Nothing here touches the system. `make_plan` is what `train --dry-run` prints and what `train` executes.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from sagemaker_mxnet_horovod.config import (
    BUILTIN_PROGRAMS,
    ConfigError,
    TrainingConfig,
    command_line_arguments,
    parse_bool,
)
from sagemaker_mxnet_horovod.facts import HostFacts
from sagemaker_mxnet_horovod.outputs import StrayOutput, find_stray_outputs
from sagemaker_mxnet_horovod.rank_env import SKIP_PREFIXES
from sagemaker_mxnet_horovod.toolkit_env import sm_environment

DEFAULT_ENTRYPOINTS_DIR = "/opt/entrypoints"
DEFAULT_RUN_DIR = "/run/sagemaker-cluster"

# Open MPI busy-polls one core per rank while it waits; below this many cores per rank that steals a large
# share of the compute (measured on 2 cores: Mask R-CNN 59 s/iter busy-polling vs 19 s/iter yielding).
YIELD_WHEN_CORES_PER_RANK_BELOW = 5

# Environment the ranks on other hosts need: sshd starts orted with a clean environment.
EXPORTED_NAMES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONUNBUFFERED", "LANG", "LC_ALL",
                  "OMP_NUM_THREADS", "TRAINING_JOB_NAME", "TRAINING_JOB_ARN")
EXPORTED_PREFIXES = ("SM_", "MXNET_", "HOROVOD_", "NCCL_", "FI_", "AWS_", "SMMH_")

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

# The GPU memory and engine settings the R-CNN blog and GluonCV's Horovod scripts tuned for V100s.
RCNN_GPU_MXNET_DEFAULTS = {
    "MXNET_GPU_MEM_POOL_TYPE": "Round",
    "MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF": "28",
    "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD": "999",
    "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD": "25",
    "MXNET_GPU_COPY_NTHREADS": "1",
    "MXNET_OPTIMIZER_AGGREGATION_SIZE": "54",
    "MXNET_CUDNN_AUTOTUNE_DEFAULT": "0",
}
PROGRAM_GPU_DEFAULTS = {"faster_rcnn": RCNN_GPU_MXNET_DEFAULTS, "mask_rcnn": RCNN_GPU_MXNET_DEFAULTS}


# NVRTC 11.8 (the GPU image's) emits PTX ISA 7.8, which drivers older than 520 cannot load: MXNet's
# runtime-compiled pointwise fusion kernels would fail there, so fusion is turned off below it.
FUSION_MIN_DRIVER = 520


# SageMaker managed warm pools keep this directory across the jobs that reuse a retained instance.
WARM_POOL_CACHE_VAR = "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"


def warm_pool_cache_env(base_env: Mapping[str, str]) -> dict[str, str]:
    """Downloads a warm-pool job can keep for the next one: pip's cache (the wheels of the user's
    requirements.txt) and MXNet's data home (MXNET_HOME: GluonCV's and Gluon's pretrained weights)."""
    cache = base_env.get(WARM_POOL_CACHE_VAR, "").rstrip("/")
    if not cache:
        return {}
    return {"PIP_CACHE_DIR": f"{cache}/pip", "MXNET_HOME": f"{cache}/mxnet"}


def gpu_support_problem(gpus: tuple[tuple[str, str], ...], archs: str | None) -> str | None:
    """Why this MXNet build cannot run on these GPUs, or None. `archs`: the SASS architectures the build
    ships (e.g. "50 60 70 80", from SMMH_CUDA_ARCHS, set at image build time), no PTX. SASS for X.y runs on
    X.z with z >= y, so an A10G (8.6) runs sm_80 code, an H100 (9.0) nothing."""
    if not archs or not gpus:
        return None
    built = sorted((int(a) // 10, int(a) % 10) for a in archs.replace(",", " ").split())
    for index, (name, capability) in enumerate(gpus):
        major, minor = (int(part) for part in capability.split("."))
        if not any(b_major == major and b_minor <= minor for b_major, b_minor in built):
            listed = ", ".join(f"sm_{m}{n}" for m, n in built)
            return (f"GPU {index} ({name}, compute capability {capability}) is not supported by this image's "
                    f"MXNet build, which has code for {listed} only (no PTX): use instances with V100, T4, "
                    f"A100 or A10G-class GPUs (ml.p3, ml.g4dn, ml.p4d, ml.g5)")
    return None


# Horovod checks for stalled collectives every this many seconds at most (its own default): each check
# warns on rank 0's stderr, naming the missing ranks, long before the stall ends the job.
STALL_CHECK_MAX_S = 60


def hang_watch_env(stall_timeout_s: float, progress_timeout_s: float) -> list[tuple[str, str, str]]:
    """(variable, value, why) for the two hang timeouts. A stall is Horovod's to see (its coordinator knows
    which ranks never submitted a tensor): its stall inspector shuts Horovod down after
    HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, the waiting ranks' collectives fail and mpirun ends the job. It checks
    every HOROVOD_STALL_CHECK_TIME_SECONDS (cached tensors take one more check to be seen), so the job ends
    within timeout + 2 checks: the check is at most half the timeout. The progress watch runs in each rank
    (rank_env)."""
    rules = []
    if stall_timeout_s > 0:
        shutdown = max(1, math.ceil(stall_timeout_s))
        check = max(1, min(STALL_CHECK_MAX_S, shutdown // 2))
        rules += [("HOROVOD_STALL_CHECK_TIME_SECONDS", str(check), "warn about stalled collectives this often"),
                  ("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", str(shutdown), "horovod_stall_timeout_s: end a stalled job")]
    if progress_timeout_s > 0:
        rules.append(("SMMH_PROGRESS_TIMEOUT_S", f"{progress_timeout_s:g}",
                      "mpi_progress_timeout_s: end the job when a rank has no output, collective or computing this long"))
    return rules


class PlanError(ConfigError):
    """The configuration is valid JSON but cannot be run on these hosts."""


@dataclass(frozen=True)
class Program:
    name: str
    argv: tuple[str, ...]  # the program and its arguments, as each rank runs it
    builtin: bool
    submit_directory: str | None = None  # local dir or s3:// tarball to fetch into code_dir first
    code_dir: str | None = None


@dataclass(frozen=True)
class Plan:
    role: str  # "single": run the program here; "master": run mpirun; "worker": serve the master's mpirun
    current_host: str
    master_host: str
    hosts: tuple[str, ...]
    processes_per_host: int
    total_processes: int
    use_mpi: bool
    interface: str | None
    program: Program
    command: tuple[str, ...]  # what this host executes: mpirun ... or the program; empty on workers
    env: Mapping[str, str]  # variables to set on top of the container's environment
    rank_env: Mapping[str, str]  # this host's SM_* values, applied by each local rank (see rank_env.py)
    rank_hosts: tuple[str, ...]  # host of each MPI rank, for naming the failing rank
    peer_timeout_s: float
    handshake_port: int
    run_dir: str
    notes: tuple[str, ...] = field(default=())
    role_reason: str = ""  # why this role, when it is not obvious (a host outside the distribution groups)
    stray_outputs: tuple[StrayOutput, ...] = ()  # copied into output/data when the job ends

    @property
    def workers(self) -> tuple[str, ...]:
        return self.hosts[1:] if self.use_mpi else ()


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


def choose_interface(requested: str | None, facts: HostFacts) -> tuple[str | None, str | None]:
    """The cluster interface and, when it differs from the request, a note saying why.

    SageMaker names the interface in resourceconfig.json; SDK v3 local mode names "ethwe", which does not
    exist in its compose network. Trust the name only if the interface exists, else take the default route's.
    """
    if requested and requested in facts.interfaces:
        return requested, None
    fallback = facts.default_route_interface or (facts.interfaces[0] if facts.interfaces else None)
    if requested:
        return fallback, f"network_interface_name {requested!r} does not exist here; using {fallback!r}"
    return fallback, None


def program_name_of(config: TrainingConfig) -> str | None:
    """The built-in program's name, or None for a user script."""
    return config.settings.program if config.settings.submit_directory is None else None


def outside_distribution_reason(config: TrainingConfig) -> str | None:
    """Why this host runs the program on its own, outside the MPI job, or None when it is one of the distribution
    hosts. As the toolkit: a host whose instance group is not a distribution group runs the program alone, as one
    process, and its own exit code is its result (heterogeneous clusters: e.g. a data-loading group)."""
    resource = config.resource
    if resource.current_host in resource.distribution_hosts:
        return None
    group = resource.group_of(resource.current_host)
    return (f"outside the distribution: instance group {group!r} is not in sagemaker_distribution_instance_groups "
            f"{list(config.settings.distribution_instance_groups or ())}; runs the program on its own, one process "
            f"(MPI runs on {', '.join(resource.distribution_hosts)}, master {resource.master_host})")


def resolve_program(config: TrainingConfig, python: str, entrypoints_dir: str) -> Program:
    settings = config.settings
    name = settings.program
    args = command_line_arguments(config.program_args)
    if not name:
        raise PlanError(
            "no program to run: set hyperparameter sagemaker_program to one of "
            f"{', '.join(BUILTIN_PROGRAMS)} or to a script in sagemaker_submit_directory"
        )
    if settings.submit_directory is None:
        if name not in BUILTIN_PROGRAMS:
            raise PlanError(
                f"unknown program {name!r}: use one of {', '.join(BUILTIN_PROGRAMS)}, "
                "or set sagemaker_submit_directory to the directory or s3:// tarball that contains it"
            )
        script = str(Path(entrypoints_dir) / f"{name}.py")
        return Program(name=name, argv=(python, script, *args), builtin=True)
    if Path(name).is_absolute() or ".." in Path(name).parts:
        raise PlanError(f"sagemaker_program {name!r} must be a path inside sagemaker_submit_directory")
    code_dir = str(config.paths.code_dir)
    script = str(Path(code_dir) / name)
    if name.endswith(".py"):
        argv = (python, script, *args)
    elif name.endswith(".sh"):
        argv = ("/bin/sh", script, *args)
    else:
        argv = (script, *args)
    return Program(name=name, argv=argv, builtin=False, submit_directory=settings.submit_directory,
                   code_dir=code_dir)


def program_env(config: TrainingConfig, facts: HostFacts, interface: str | None, program: Program,
                base_env: Mapping[str, str]) -> dict:
    """SM_* variables as the sagemaker-training toolkit exports them, so toolkit-style scripts run unchanged."""
    return sm_environment(config, facts.cpu_count, facts.gpu_count, interface, program.name, base_env)


def nccl_debug_rule(requested: str | None, facts: HostFacts, base_env: Mapping[str, str], env: dict,
                    notes: list, default) -> None:
    """NCCL_DEBUG: `--NCCL_DEBUG=X` in sagemaker_mpi_custom_mpi_options sets it on every rank, over the
    environment (the toolkit passes it as `-x NCCL_DEBUG=X`). Otherwise WARN on GPU hosts, where the toolkit
    defaults to INFO: INFO prints NCCL's setup from every rank at every start (dozens of lines per GPU) into
    the job's log; WARN still prints NCCL's warnings and errors."""
    if requested is not None:
        env["NCCL_DEBUG"] = requested
        overridden = f", over NCCL_DEBUG={base_env['NCCL_DEBUG']} in the environment" if "NCCL_DEBUG" in base_env else ""
        notes.append(f"NCCL_DEBUG={requested} (--NCCL_DEBUG in sagemaker_mpi_custom_mpi_options{overridden})")
    elif facts.gpu_count:
        default("NCCL_DEBUG", "WARN", "NCCL's warnings and errors; --NCCL_DEBUG=INFO in "
                                      "sagemaker_mpi_custom_mpi_options for its setup details")


def mpi_params(interface: str | None, yield_when_idle: bool, run_dir: str | None) -> list[tuple[str, str]]:
    """The -mca parameters, in order. Why each: docs/launcher.md ("The mpirun command")."""
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


def _user_sets_mca(name: str, custom: tuple[str, ...], base_env: Mapping[str, str]) -> bool:
    if f"OMPI_MCA_{name}" in base_env:
        return True
    return any(custom[i] in ("-mca", "--mca") and custom[i + 1] == name for i in range(len(custom) - 1))


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


def make_plan(
    config: TrainingConfig,
    facts: HostFacts,
    base_env: Mapping[str, str],
    python: str = "python3",
    entrypoints_dir: str = DEFAULT_ENTRYPOINTS_DIR,
    run_dir: str = DEFAULT_RUN_DIR,
) -> Plan:
    settings, resource = config.settings, config.resource
    notes = list(config.warnings)
    hosts = resource.distribution_hosts
    outside_reason = outside_distribution_reason(config)
    if outside_reason:
        settings = replace(settings, processes_per_host=1, mpi_enabled=False)
        hosts = (resource.current_host,)
    elif config.settings.distribution_instance_groups is None and len(resource.instance_groups) > 1:
        notes.append(f"sagemaker_distribution_instance_groups not set: MPI spans this host's instance group "
                     f"{resource.group_of(resource.current_host)!r} only (each group its own job, as the toolkit "
                     "does with MPI enabled)")

    # The R-CNN programs' `horovod=false` is the non-Horovod baseline: one process per host over all of
    # its devices with MXNet's kvstore, so no MPI and one host only.
    horovod_off = (program_name_of(config) in ("faster_rcnn", "mask_rcnn") and "horovod" in config.program_args
                   and not parse_bool("horovod", config.program_args["horovod"]))
    if horovod_off:
        if len(hosts) > 1:
            raise PlanError(f"horovod=false runs one process on one host; this job has {len(hosts)} "
                            "hosts (use horovod=true, or instance_count=1)")
        if settings.processes_per_host not in (None, 1) or settings.mpi_enabled:
            raise PlanError("horovod=false runs one process without MPI: remove sagemaker_mpi_enabled and "
                            "sagemaker_mpi_num_of_processes_per_host")
        settings = replace(settings, processes_per_host=1, mpi_enabled=False)
        notes.append("horovod=false: one process over all devices with MXNet's kvstore, no MPI")

    # Processes per host: the hyperparameter, else one per GPU, else one.
    if settings.processes_per_host is not None:
        per_host = settings.processes_per_host
        if facts.gpu_count and per_host > facts.gpu_count:
            raise PlanError(
                f"sagemaker_mpi_num_of_processes_per_host={per_host} but {resource.current_host} "
                f"has {facts.gpu_count} GPU(s): more processes than slots"
            )
        if not facts.gpu_count and per_host > facts.cpu_count:
            # On CPU hosts more ranks than cores only share the cores (the toolkit never refuses it);
            # it is how small jobs and tests run several ranks per host.
            notes.append(f"sagemaker_mpi_num_of_processes_per_host={per_host} on {facts.cpu_count} CPU core(s): "
                         "the ranks share the cores (oversubscribed)")
    else:
        per_host = max(1, facts.gpu_count)
    total = per_host * len(hosts)
    if settings.mpi_enabled is False and per_host > 1:
        raise PlanError(
            f"sagemaker_mpi_enabled=false cannot run {per_host} processes per host; "
            "enable MPI or set sagemaker_mpi_num_of_processes_per_host=1"
        )
    use_mpi = settings.mpi_enabled if settings.mpi_enabled is not None else total > 1
    if not use_mpi and len(hosts) > 1:
        notes.append(f"MPI disabled: each of the {len(hosts)} hosts runs the program on its own")

    interface, interface_note = choose_interface(resource.network_interface_name, facts)
    if interface_note:
        notes.append(interface_note)
    if use_mpi and len(hosts) > 1 and not interface:
        raise PlanError("no network interface found for a multi-host job (no default route, no interface)")

    program = resolve_program(config, python, entrypoints_dir)
    sm_env = program_env(config, facts, interface, program, base_env)

    env: dict[str, str] = {}

    def default(name: str, value: str, why: str) -> None:
        if name in base_env:
            notes.append(f"{name}={base_env[name]} (set by you; default would be {value}: {why})")
        else:
            env[name] = value
            notes.append(f"{name}={value} ({why})")

    env.update(sm_env)
    for name, value in warm_pool_cache_env(base_env).items():
        default(name, value, f"{WARM_POOL_CACHE_VAR} is set: kept for the next job on this warm-pool instance")
    problem = gpu_support_problem(facts.gpus, base_env.get("SMMH_CUDA_ARCHS"))
    if problem:
        raise PlanError(problem)
    if facts.gpu_count and facts.nvidia_driver_version:
        driver_major = int(facts.nvidia_driver_version.split(".")[0])
        if driver_major < FUSION_MIN_DRIVER:
            default("MXNET_USE_FUSION", "0", f"NVIDIA driver {facts.nvidia_driver_version} < {FUSION_MIN_DRIVER} "
                                             "cannot load the PTX of MXNet's runtime-compiled fused kernels")
    if facts.gpu_count:
        for name, value in PROGRAM_GPU_DEFAULTS.get(program.name, {}).items():
            default(name, value, f"tuned for {program.name} on GPUs")

    horovod_output = config.paths.output_data_dir
    if settings.horovod_autotune:
        default("HOROVOD_AUTOTUNE", "1", "horovod_autotune")
        default("HOROVOD_AUTOTUNE_LOG", str(horovod_output / "horovod_autotune_log.csv"), "uploaded with output")
    if settings.horovod_timeline:
        default("HOROVOD_TIMELINE", str(horovod_output / "horovod_timeline.json"), "uploaded with output")
    if settings.horovod_fusion_threshold_mb is not None:
        default("HOROVOD_FUSION_THRESHOLD", str(int(settings.horovod_fusion_threshold_mb * 1024 * 1024)),
                "horovod_fusion_threshold_mb")
    if settings.horovod_cycle_time_ms is not None:
        default("HOROVOD_CYCLE_TIME", f"{settings.horovod_cycle_time_ms:g}", "horovod_cycle_time_ms")
    nccl_debug_rule(settings.nccl_debug, facts, base_env, env, notes, default)
    # mpirun options apply only when there is an mpirun.
    strays = find_stray_outputs(config.paths, settings.custom_mpi_options if use_mpi else (), {**base_env, **env})
    notes += [stray.warning(config.paths) for stray in strays]
    for name, value, why in hang_watch_env(settings.stall_timeout_s, settings.progress_timeout_s):
        default(name, value, why)

    # Every rank, MPI or not, starts through rank_env: this host's SM_* values, line-buffered output, and the
    # code directory as its working directory, as under the toolkit (scripts open files next to them).
    rank_argv = (python, "-m", "sagemaker_mxnet_horovod.rank_env", run_dir, str(config.paths.code_dir), "--",
                 *program.argv)
    command: tuple[str, ...] = rank_argv
    rank_hosts: tuple[str, ...] = (resource.current_host,)
    role = "single"
    if use_mpi:
        role = "master" if resource.is_master else "worker"
        rank_hosts = tuple(h for h in hosts for _ in range(per_host))
        cores_per_rank = max(1, facts.cpu_count // per_host)
        default("OMP_NUM_THREADS", str(cores_per_rank), f"{facts.cpu_count} cores / {per_host} ranks per host")
        yield_when_idle = cores_per_rank < YIELD_WHEN_CORES_PER_RANK_BELOW and not _user_sets_mca(
            "mpi_yield_when_idle", settings.custom_mpi_options, base_env)
        if yield_when_idle:
            notes.append(f"mpi_yield_when_idle=1 ({cores_per_rank} core(s) per rank: busy polling would starve it)")
        if interface:
            default("NCCL_SOCKET_IFNAME", interface, "the cluster interface")
        if resource.current_instance_type in NCCL_100G_INSTANCE_TYPES:
            for name, value in NCCL_100G_SOCKET_DEFAULTS.items():
                default(name, value, f"NCCL sockets on {resource.current_instance_type}'s 100+ Gbps network "
                                     "(NCCL's documentation; no EFA plugin in this image)")
        multi_host = len(hosts) > 1
        params = [(n, v) for n, v in mpi_params(interface if multi_host else None, yield_when_idle,
                                                run_dir if multi_host else None)
                  if not (n != "mpi_yield_when_idle" and _user_sets_mca(n, settings.custom_mpi_options, base_env))]
        merged = {**base_env, **env}
        exported = sorted(n for n in merged if n in EXPORTED_NAMES or n.startswith(EXPORTED_PREFIXES))
        command = build_mpirun_command(hosts, facts.hostname, per_host, params, exported, settings.custom_mpi_options, rank_argv)
        if role == "worker":
            command = ()

    return Plan(
        role=role,
        current_host=resource.current_host,
        master_host=resource.master_host if use_mpi else resource.current_host,
        hosts=hosts if use_mpi else (resource.current_host,),
        processes_per_host=per_host,
        total_processes=total if use_mpi else 1,
        use_mpi=use_mpi,
        interface=interface,
        program=program,
        command=command,
        env=env,
        rank_env=sm_env,
        rank_hosts=rank_hosts,
        peer_timeout_s=settings.peer_timeout_s,
        handshake_port=settings.handshake_port,
        run_dir=run_dir,
        notes=tuple(notes),
        role_reason=outside_reason or "",
        stray_outputs=tuple(strays),
    )


def rank_environment(plan: Plan, base_env: Mapping[str, str]) -> dict:
    """What every rank on this host should see: this container's own environment (SageMaker gives each
    container the job's `environment`, but sshd starts remote ranks with an empty one and mpirun exports
    only the master's), the launcher's defaults, and this host's SM_* values."""
    merged = {**base_env, **plan.env, **plan.rank_env}
    return {k: v for k, v in merged.items() if not k.startswith(SKIP_PREFIXES)}


def describe(plan: Plan, base_env: Mapping[str, str]) -> str:
    """Human-readable plan, for `train --dry-run` and the start log."""
    slots = ", ".join(f"{h}:{plan.processes_per_host}" for h in plan.hosts)
    processes = f"{plan.total_processes} process{'es' if plan.total_processes != 1 else ''}"
    lines = [
        f"role: {plan.role}" + (f" ({plan.role_reason})" if plan.role_reason else ""),
        f"current host: {plan.current_host}  master: {plan.master_host}",
        f"hosts: {slots}  ({processes}, {'MPI' if plan.use_mpi else 'no MPI'})",
        f"interface: {plan.interface}",
        f"program: {plan.program.name}" + ("" if plan.program.builtin else f" from {plan.program.submit_directory}"),
    ]
    if plan.command:
        lines.append("command: " + shlex.join(plan.command))
    changed = {k: v for k, v in plan.env.items() if base_env.get(k) != v and not k.startswith("SM_")}
    if changed:
        lines.append("env: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(changed.items())))
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)

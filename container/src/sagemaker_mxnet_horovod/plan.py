"""Plan: from a TrainingConfig and HostFacts to the exact argv and environment, as data.

Nothing here touches the system. `make_plan` is what `train --dry-run` prints and what `train` executes.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from sagemaker_mxnet_horovod.config import BUILTIN_PROGRAMS, ConfigError, TrainingConfig, parse_bool
from sagemaker_mxnet_horovod.facts import HostFacts
from sagemaker_mxnet_horovod.rank_env import SKIP_PREFIXES

DEFAULT_ENTRYPOINTS_DIR = "/opt/entrypoints"
DEFAULT_RUN_DIR = "/run/sagemaker-cluster"

# Open MPI busy-polls one core per rank while it waits; below this many cores per rank that steals a large
# share of the compute (measured on 2 cores: Mask R-CNN 59 s/iter busy-polling vs 19 s/iter yielding).
YIELD_WHEN_CORES_PER_RANK_BELOW = 5

# Environment the ranks on other hosts need: sshd starts orted with a clean environment.
EXPORTED_NAMES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONUNBUFFERED", "LANG", "LC_ALL",
                  "OMP_NUM_THREADS", "TRAINING_JOB_NAME", "TRAINING_JOB_ARN")
EXPORTED_PREFIXES = ("SM_", "MXNET_", "HOROVOD_", "NCCL_", "FI_", "AWS_", "SMMH_")

# Instance types with an Elastic Fabric Adapter, where NCCL must go through libfabric's EFA provider.
EFA_INSTANCE_TYPES = frozenset({
    "ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge",
    "ml.g4dn.8xlarge", "ml.g4dn.12xlarge", "ml.g4dn.16xlarge", "ml.g5.8xlarge", "ml.g5.12xlarge",
    "ml.g5.16xlarge", "ml.g5.24xlarge", "ml.g5.48xlarge", "ml.c5n.9xlarge", "ml.c5n.18xlarge",
})
EFA_RDMA_INSTANCE_TYPES = frozenset({"ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge"})

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


def resolve_program(config: TrainingConfig, python: str, entrypoints_dir: str) -> Program:
    settings = config.settings
    name = settings.program
    args = []
    for key, value in config.program_args.items():
        args += [f"--{key}", value]
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


def program_env(config: TrainingConfig, facts: HostFacts, interface: str | None, program: Program) -> dict:
    """SM_* variables as the sagemaker-training toolkit exports them, so toolkit-style scripts run unchanged."""
    paths, resource = config.paths, config.resource
    user_hps = {k: v for k, v in config.hyperparameters.items() if k in config.program_args}
    channel_dirs = {c.name: str(paths.data_dir / c.name) for c in config.channels}
    user_args = [item for key, value in config.program_args.items() for item in (f"--{key}", value)]
    group_hosts = next((g.hosts for g in resource.instance_groups if g.name == resource.current_group_name), ())
    training_env = {
        "hosts": list(resource.hosts),
        "current_host": resource.current_host,
        "master_hostname": resource.master_host,
        "is_master": resource.is_master,
        "network_interface_name": interface,
        "hyperparameters": user_hps,
        "channel_input_dirs": channel_dirs,
        "input_data_config": config.raw_input_data_config,
        "resource_config": config.raw_resource_config,
        "current_instance_type": resource.current_instance_type,
        "current_instance_group": resource.current_group_name,
        "num_cpus": facts.cpu_count,
        "num_gpus": facts.gpu_count,
        "model_dir": str(paths.model_dir),
        "output_data_dir": str(paths.output_data_dir),
        "user_entry_point": program.name,
        "module_dir": program.submit_directory or str(Path(program.argv[1]).parent),
    }
    env = {
        "SM_HOSTS": json.dumps(list(resource.hosts)),
        "SM_CURRENT_HOST": resource.current_host,
        "SM_MASTER_ADDR": resource.master_host,
        "SM_NETWORK_INTERFACE_NAME": interface or "",
        "SM_NUM_CPUS": str(facts.cpu_count),
        "SM_NUM_GPUS": str(facts.gpu_count),
        "SM_CURRENT_INSTANCE_TYPE": resource.current_instance_type or "",
        "SM_CURRENT_INSTANCE_GROUP": resource.current_group_name or "",
        "SM_CURRENT_INSTANCE_GROUP_HOSTS": json.dumps(list(group_hosts)),
        "SM_MODEL_DIR": str(paths.model_dir),
        "SM_INPUT_DIR": str(paths.input_dir),
        "SM_INPUT_CONFIG_DIR": str(paths.config_dir),
        "SM_OUTPUT_DIR": str(paths.output_dir),
        "SM_OUTPUT_DATA_DIR": str(paths.output_data_dir),
        "SM_OUTPUT_INTERMEDIATE_DIR": str(paths.output_intermediate_dir),
        "SM_CHECKPOINT_DIR": str(paths.checkpoint_dir),
        "SM_CHANNELS": json.dumps(sorted(channel_dirs)),
        "SM_HPS": json.dumps(user_hps),
        "SM_USER_ARGS": json.dumps(user_args),
        "SM_USER_ENTRY_POINT": program.name,
        "SM_MODULE_NAME": Path(program.name).stem,
        "SM_MODULE_DIR": training_env["module_dir"],
        "SM_RESOURCE_CONFIG": json.dumps(config.raw_resource_config),
        "SM_INPUT_DATA_CONFIG": json.dumps(config.raw_input_data_config),
        "SM_FRAMEWORK_PARAMS": "{}",
        "SM_TRAINING_ENV": json.dumps(training_env),
    }
    for name, path in channel_dirs.items():
        env[f"SM_CHANNEL_{name.upper()}"] = path
    for key, value in config.program_args.items():
        env[f"SM_HP_{key.upper()}"] = value
    return env


def mpi_params(interface: str | None, yield_when_idle: bool, run_dir: str | None,
               efa: bool = False) -> list[tuple[str, str]]:
    """The -mca parameters, in order. Why each: see docs in README (Launcher > mpirun flags)."""
    params = [
        ("pml", "ob1"),  # TCP/shared memory; no UCX/openib probing on hosts without InfiniBand
        # Without a fabric, the libfabric BTL only costs time: ~0.5 s in MPI_Init and 1 s in MPI_Finalize
        # per job across hosts (measured here); it stays where EFA is what it would find.
        ("btl", "^openib" if efa else "^openib,ofi"),
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

    # The R-CNN programs' `horovod=false` is the non-Horovod baseline: one process per host over all of
    # its devices with MXNet's kvstore, so no MPI and one host only.
    horovod_off = (program_name_of(config) in ("faster_rcnn", "mask_rcnn") and "horovod" in config.program_args
                   and not parse_bool("horovod", config.program_args["horovod"]))
    if horovod_off:
        if len(resource.hosts) > 1:
            raise PlanError(f"horovod=false runs one process on one host; this job has {len(resource.hosts)} "
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
            raise PlanError(
                f"sagemaker_mpi_num_of_processes_per_host={per_host} but {resource.current_host} "
                f"has {facts.cpu_count} CPU core(s): more processes than slots"
            )
    else:
        per_host = max(1, facts.gpu_count)
    hosts = resource.hosts
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
    sm_env = program_env(config, facts, interface, program)

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

    # Every rank, MPI or not, starts through rank_env: this host's SM_* values, line-buffered output.
    rank_argv = (python, "-m", "sagemaker_mxnet_horovod.rank_env", run_dir, "--", *program.argv)
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
        efa = resource.current_instance_type in EFA_INSTANCE_TYPES
        if efa:
            default("FI_PROVIDER", "efa", f"{resource.current_instance_type} has EFA")
            default("NCCL_PROTO", "simple", "EFA")
            if resource.current_instance_type in EFA_RDMA_INSTANCE_TYPES:
                default("FI_EFA_USE_DEVICE_RDMA", "1", "EFA with GPUDirect RDMA")
        multi_host = len(hosts) > 1
        params = [(n, v) for n, v in mpi_params(interface if multi_host else None, yield_when_idle,
                                                run_dir if multi_host else None, efa=efa)
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
        f"role: {plan.role}",
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

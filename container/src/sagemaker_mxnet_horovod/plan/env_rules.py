"""Environment rules: the variables the launcher sets for every rank, each with its reason.

A rule reads the planner's inputs (PlanInputs: the config, this host's facts, the user's environment, the layout,
the program) and returns Settings (a variable, its value, why) and notes for the start log. What the user sets wins
over a rule's default, by whichever route they set it: the job's `environment` (the container's) or the backend's
own options (MPI's `-x NAME=VALUE` in sagemaker_mpi_custom_mpi_options, which also win over a value the user asked
for in the hyperparameters); the start log says so (docs/launcher.md, "Who wins", has the whole table). RULES lists
every job's rules in the order the start log shows them; a backend's own rules (Backend.rules, in its folder of
backends/) follow them.

Adding a default is a rule and a line in RULES (or in a backend's rules, for its jobs only), e.g.:

    def horovod_cycle_time_on_cpu(job: PlanInputs) -> list[Setting]:
        if job.facts.gpu_count:
            return []
        return [Setting("HOROVOD_CYCLE_TIME", "5", "measured: ...")]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from sagemaker_mxnet_straggler.hook import EVERY_S_VARIABLE as STRAGGLER_EVERY_S_VARIABLE
from sagemaker_mxnet_straggler.hook import VARIABLE as STRAGGLER_VARIABLE

from sagemaker_mxnet_horovod.core.exits import PlanError
from sagemaker_mxnet_horovod.core.plan import Program, ShmBudget
from sagemaker_mxnet_horovod.diagnose import shm
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.settings import KEYS
from sagemaker_mxnet_horovod.parse.training_config import TrainingConfig
from sagemaker_mxnet_horovod.plan.layout import MPI, PARAMETER_SERVER, Layout


@dataclass(frozen=True)
class PlanInputs:
    """The planner's inputs: everything a rule may read. A rule reads the user's own values in user_env."""

    config: TrainingConfig
    facts: HostFacts
    base_env: Mapping[str, str]  # the container's environment (the job's `environment`, SageMaker's, the image's)
    layout: Layout
    program: Program
    # The backend's ranks' collectives use /dev/shm (Backend.collectives_in_shm): Open MPI's segments, NCCL's.
    collectives_in_shm: bool = False
    # What the backend's own options set on every rank (Backend.options_env; MPI: -x NAME=VALUE, and -x NAME for a
    # variable of the container's): the user's too, and more specific than the container's environment.
    options_env: Mapping[str, str] = field(default_factory=dict)

    @cached_property
    def user_env(self) -> Mapping[str, str]:
        """The environment the user gives the ranks: the container's, with the backend's options over it."""
        return {**self.base_env, **self.options_env}


@dataclass(frozen=True)
class Setting:
    """A variable a rule sets on every rank, and why. Whatever the user sets wins (user_wins), by any route. A value
    the user asked for in the hyperparameters (--NCCL_DEBUG, horovod_gradient_compression) or that the backend
    decides (the parameter server's layout) replaces the container's environment (user_wins=False), and yields only
    to the backend's options (-x), the more specific; a value the job cannot run without (required: the address
    where the master serves Gloo's rendezvous) replaces every route of the user's."""

    name: str
    value: str
    why: str
    user_wins: bool = True
    required: bool = False


Rule = Callable[[PlanInputs], "list[Setting | str]"]  # a str is a note for the start log


def users_value(effect: Setting, job: PlanInputs) -> str | None:
    """The user's own value for the setting's variable, when it replaces the setting's (Setting's precedence)."""
    if effect.required:
        return None
    if effect.name in job.options_env:
        return job.options_env[effect.name]
    return job.base_env.get(effect.name) if effect.user_wins else None


def apply_rules(rules: tuple[Rule, ...], job: PlanInputs) -> tuple[dict[str, str], list[str]]:
    """The variables to set on top of the user's environment, and a note for each, in rule order: what the user
    set instead of a rule's value is named as theirs, with the value it replaced."""
    env: dict[str, str] = {}
    notes: list[str] = []
    for rule in rules:
        for effect in rule(job):
            if isinstance(effect, str):
                notes.append(effect)
            elif (users := users_value(effect, job)) is not None:
                notes.append(f"{effect.name}={users} (set by you; default would be {effect.value}: {effect.why})")
            else:
                env[effect.name] = effect.value
                notes.append(f"{effect.name}={effect.value} ({effect.why})")
    return env, notes


# ---------------------------------------------------------------------------------------------------------
# Any host

# SageMaker managed warm pools keep this directory across the jobs that reuse a retained instance.
WARM_POOL_CACHE_VAR = "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"


def warm_pool_cache(job: PlanInputs) -> list[Setting]:
    """Downloads a warm-pool job can keep for the next one: pip's cache (the wheels of the user's
    requirements.txt), MXNet's data home (MXNET_HOME: GluonCV's and Gluon's pretrained weights) and, on GPU hosts,
    CUDA's JIT cache: MXNet compiles its fused pointwise kernels with NVRTC in every process and the driver turns
    their PTX into machine code, a first-step cost the cache saves in the next job (not measured: no GPU here)."""
    cache = job.user_env.get(WARM_POOL_CACHE_VAR, "").rstrip("/")
    if not cache:
        return []
    why = f"{WARM_POOL_CACHE_VAR} is set: kept for the next job on this warm-pool instance"
    kept = [Setting("PIP_CACHE_DIR", f"{cache}/pip", why), Setting("MXNET_HOME", f"{cache}/mxnet", why)]
    if job.facts.gpu_count:
        kept.append(Setting("CUDA_CACHE_PATH", f"{cache}/cuda", f"{why} (the driver's JIT cache of fused kernels)"))
    return kept


def program_environment(job: PlanInputs) -> list[Setting]:
    """The program's own defaults, from its launch module (e.g. R-CNN's MXNet settings on GPUs)."""
    return [Setting(name, value, why) for name, value, why in job.config.launch.environment(job.program.name,
                                                                                     job.facts.gpu_count)]


def horovod_hyperparameters(job: PlanInputs) -> list[Setting]:
    """The launcher's Horovod hyperparameters, as Horovod's variables; its files go where SageMaker uploads."""
    settings, output = job.config.settings, job.config.paths.output_data_dir
    found = []
    if settings.horovod_autotune:
        found += [Setting("HOROVOD_AUTOTUNE", "1", KEYS.horovod_autotune),
                  Setting("HOROVOD_AUTOTUNE_LOG", str(output / "horovod_autotune_log.csv"), "uploaded with output")]
    if settings.horovod_timeline:
        found.append(Setting("HOROVOD_TIMELINE", str(output / "horovod_timeline.json"), "uploaded with output"))
    if settings.horovod_fusion_threshold_mb is not None:
        found.append(Setting("HOROVOD_FUSION_THRESHOLD", str(int(settings.horovod_fusion_threshold_mb * 1024 * 1024)),
                             KEYS.horovod_fusion_threshold_mb))
    if settings.horovod_cycle_time_ms is not None:
        found.append(Setting("HOROVOD_CYCLE_TIME", f"{settings.horovod_cycle_time_ms:g}", KEYS.horovod_cycle_time_ms))
    if settings.horovod_gradient_compression != "none":
        # Read inside every rank by the image's sagemaker_mxnet_compression.pth; the knob already chose between
        # the hyperparameter and this same variable in the environment.
        found.append(Setting("HOROVOD_GRADIENT_COMPRESSION", settings.horovod_gradient_compression,
                             f"{KEYS.horovod_gradient_compression}: hvd.DistributedTrainer without compression= "
                             "compresses gradients for their allreduce", user_wins=False))
    return found


def straggler_report(job: PlanInputs) -> list[Setting | str]:
    """Where every MPI rank's straggler recorder (the image's sagemaker_mxnet_straggler.pth) has rank 0 write its
    report. It times hvd.DistributedTrainer, which a parameter-server job does not use: off there, said."""
    if not job.config.settings.horovod_straggler_report:
        return []
    if job.layout.distribution == PARAMETER_SERVER:
        return [f"straggler report: off in a parameter-server job ({KEYS.horovod_straggler_report} times "
                "hvd.DistributedTrainer's allreduces; kvstore workers have none)"]
    if job.layout.distribution != MPI:
        return []  # one process: no other rank to wait for
    every_s = job.config.settings.horovod_straggler_every_s
    return [Setting(STRAGGLER_VARIABLE, str(job.config.paths.output_data_dir / "straggler"),
                    f"{KEYS.horovod_straggler_report}: which rank the others wait for, in the log and this report"),
            Setting(STRAGGLER_EVERY_S_VARIABLE, f"{every_s:g}",
                    f"{KEYS.horovod_straggler_every_s}: a step timed about every {every_s:g} s, at least 10 apart "
                    "(on short steps one in 10 would cost more than 1% of a step)")]


# Horovod checks for stalled collectives every this many seconds at most (its own default): each check
# warns on rank 0's stderr, naming the missing ranks, long before the stall ends the job.
STALL_CHECK_MAX_S = 60


def hang_watch_env(stall_timeout_s: float, progress_timeout_s: float) -> list[tuple[str, str, str]]:
    """(variable, value, why) for the two hang timeouts. A stall is Horovod's to see (its coordinator knows
    which ranks never submitted a tensor): its stall inspector shuts Horovod down after
    HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, the waiting ranks' collectives fail and mpirun ends the job. It checks
    every HOROVOD_STALL_CHECK_TIME_SECONDS (cached tensors take one more check to be seen), so the job ends
    within timeout + 2 checks: the check is at most half the timeout. The progress watch runs in each rank
    (act/rank_program.py)."""
    rules = []
    if stall_timeout_s > 0:
        shutdown = max(1, math.ceil(stall_timeout_s))
        check = max(1, min(STALL_CHECK_MAX_S, shutdown // 2))
        rules += [("HOROVOD_STALL_CHECK_TIME_SECONDS", str(check), "warn about stalled collectives this often"),
                  ("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", str(shutdown), f"{KEYS.stall_timeout_s}: end a stalled job")]
    if progress_timeout_s > 0:
        rules.append(("SMMH_PROGRESS_TIMEOUT_S", f"{progress_timeout_s:g}",
                      f"{KEYS.progress_timeout_s}: end the job when a rank has no output, collective or computing "
                      "this long"))
    return rules


def hang_watch(job: PlanInputs) -> list[Setting]:
    settings = job.config.settings
    return [Setting(*rule) for rule in hang_watch_env(settings.stall_timeout_s, settings.progress_timeout_s)]


def shm_budget(job: PlanInputs) -> ShmBudget:
    """This host's /dev/shm against what the job needs there: its ranks (a parameter-server job's workers), their
    data-loader workers, its GPUs."""
    layout = job.layout
    declared = job.config.launch.loader_workers
    if declared and callable(declared[1]):  # the program picks its default from the host: ask it the same way
        declared = (declared[0], declared[1](job.facts.gpu_count, layout.processes_per_host, job.facts.cpu_count))
    workers, key = shm.loader_workers(job.config.program_args, declared)
    mpi = job.collectives_in_shm
    gpus = min(job.facts.gpu_count, layout.processes_per_host) if mpi else 0
    return shm.estimate(job.facts.shm_bytes, layout.processes_per_host, workers, key, gpus, mpi=mpi,
                        free_bytes=job.facts.shm_free_bytes)


def shm_size_check(job: PlanInputs) -> list[str]:
    """A warning, with the fixes, when /dev/shm is smaller than the job needs (Docker's default is 64 MiB)."""
    warning = shm.start_warning(shm_budget(job))
    return [warning] if warning else []


# ---------------------------------------------------------------------------------------------------------
# GPU hosts

# NVRTC 11.8 (the GPU image's) emits PTX ISA 7.8, which drivers older than 520 cannot load: MXNet's
# runtime-compiled pointwise fusion kernels would fail there, so fusion is turned off below it.
FUSION_MIN_DRIVER = 520


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


def check_gpus_supported(facts: HostFacts, base_env: Mapping[str, str]) -> None:
    problem = gpu_support_problem(facts.gpus, base_env.get("SMMH_CUDA_ARCHS"))
    if problem:
        raise PlanError(problem)


def fusion_off_on_old_drivers(job: PlanInputs) -> list[Setting]:
    facts = job.facts
    if not facts.gpu_count or not facts.nvidia_driver_version:
        return []
    if int(facts.nvidia_driver_version.split(".")[0]) >= FUSION_MIN_DRIVER:
        return []
    return [Setting("MXNET_USE_FUSION", "0", f"NVIDIA driver {facts.nvidia_driver_version} < {FUSION_MIN_DRIVER} "
                                             "cannot load the PTX of MXNet's runtime-compiled fused kernels")]


def nccl_debug(job: PlanInputs) -> list[Setting]:
    """NCCL_DEBUG: `--NCCL_DEBUG=X` in sagemaker_mpi_custom_mpi_options sets it on every rank, over the
    environment (the toolkit passes it as `-x NCCL_DEBUG=X`). Otherwise WARN on GPU hosts, where the toolkit
    defaults to INFO: INFO prints NCCL's setup from every rank at every start (dozens of lines per GPU) into
    the job's log; WARN still prints NCCL's warnings and errors."""
    requested = job.config.settings.custom_mpi_options.nccl_debug
    if requested is not None:
        user = job.base_env.get("NCCL_DEBUG")
        over = f", over NCCL_DEBUG={user} in the environment" if user is not None else ""
        return [Setting("NCCL_DEBUG", requested, f"--NCCL_DEBUG in {KEYS.custom_mpi_options}{over}",
                        user_wins=False)]
    if job.facts.gpu_count:
        return [Setting("NCCL_DEBUG", "WARN", "NCCL's warnings and errors; --NCCL_DEBUG=INFO in "
                                              f"{KEYS.custom_mpi_options} for its setup details")]
    return []


# The rules of every job, in the order the start log shows them; each backend adds its own after these
# (Backend.rules).
RULES: tuple[Rule, ...] = (
    warm_pool_cache,
    fusion_off_on_old_drivers,
    program_environment,
    horovod_hyperparameters,
    straggler_report,
    nccl_debug,
    hang_watch,
    shm_size_check,
)

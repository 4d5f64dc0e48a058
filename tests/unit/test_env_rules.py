"""env_rules: each environment rule's branches, and how a rule's Settings become the plan's env and notes."""

from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.config import Paths, parse_training_config
from sagemaker_mxnet_horovod.env_rules import (
    RULES,
    Job,
    Setting,
    apply_rules,
    check_gpus_supported,
    fusion_off_on_old_drivers,
    gpu_support_problem,
    hang_watch,
    horovod_hyperparameters,
    mpi_yield_when_idle,
    nccl_debug,
    nccl_socket_interface,
    nccl_sockets_on_100g,
    omp_threads_per_rank,
    program_environment,
    warm_pool_cache,
)
from sagemaker_mxnet_horovod.facts import HostFacts
from sagemaker_mxnet_horovod.layout import plan_layout
from sagemaker_mxnet_horovod.programs import PlanError, load_launch_rules, program_name_of, resolve_program

ENTRYPOINTS = str(Path(__file__).resolve().parents[2] / "entrypoints")
CPU2 = HostFacts(cpu_count=2, interfaces=("eth0",), default_route_interface="eth0")
CPU16 = HostFacts(cpu_count=16, interfaces=("eth0",), default_route_interface="eth0")
GPU8 = HostFacts(cpu_count=64, gpu_count=8, interfaces=("eth0",), default_route_interface="eth0")
V100 = (("Tesla V100-SXM2-16GB", "7.0"),)
H100 = (("NVIDIA H100 80GB HBM3", "9.0"),)


def job(hosts=("algo-1",), facts=CPU2, env=None, instance_type=None, **hps):
    """A Job as make_plan builds it: the real config, layout and launch rules."""
    resource = {"current_host": "algo-1", "hosts": list(hosts), "network_interface_name": "eth0",
                **({"current_instance_type": instance_type} if instance_type else {})}
    config = parse_training_config(Paths(Path("/opt/ml")), resource, {"sagemaker_program": "mnist", **hps}, {}, {})
    launch = load_launch_rules(program_name_of(config), ENTRYPOINTS)
    return Job(config, facts, env or {}, plan_layout(config, facts, launch), resolve_program(config, "python", ENTRYPOINTS),
               launch)


def two_hosts(**kwargs):
    return job(hosts=("algo-1", "algo-2"), **kwargs)


def settings(effects):
    return {effect.name: effect.value for effect in effects}


# --- apply_rules --------------------------------------------------------------------------------------------

def test_a_default_is_set_and_noted_with_its_reason():
    env, notes = apply_rules((lambda job: [Setting("A", "1", "why")],), job())
    assert env == {"A": "1"} and notes == ["A=1 (why)"]


def test_the_containers_environment_wins_over_a_default_and_the_note_says_so():
    env, notes = apply_rules((lambda job: [Setting("A", "1", "why")],), job(env={"A": "7"}))
    assert env == {} and notes == ["A=7 (set by you; default would be 1: why)"]


def test_a_setting_the_user_asked_for_in_the_hyperparameters_wins_over_the_environment():
    env, notes = apply_rules((lambda job: [Setting("A", "2", "asked for", user_wins=False)],), job(env={"A": "7"}))
    assert env == {"A": "2"} and notes == ["A=2 (asked for)"]


def test_notes_and_settings_keep_rule_order():
    rules = (lambda job: ["first"], lambda job: [Setting("B", "1", "b"), "third"], lambda job: [])
    assert apply_rules(rules, job()) == ({"B": "1"}, ["first", "B=1 (b)", "third"])


def test_a_new_default_rule_is_a_function_and_a_place_in_the_rules():
    def horovod_cycle_time_on_cpu(job):
        if job.facts.gpu_count or not job.layout.use_mpi:
            return []
        return [Setting("HOROVOD_CYCLE_TIME", "5", "measured")]

    rules = (*RULES, horovod_cycle_time_on_cpu)
    assert apply_rules(rules, two_hosts())[0]["HOROVOD_CYCLE_TIME"] == "5"
    assert "HOROVOD_CYCLE_TIME" not in apply_rules(rules, job())[0]


def test_every_rule_is_named_and_says_nothing_on_a_plain_single_cpu_job_but_the_stall_watch():
    assert len({rule.__name__ for rule in RULES}) == len(RULES)
    assert settings(e for rule in RULES for e in rule(job())) == {
        "HOROVOD_STALL_CHECK_TIME_SECONDS": "60", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "3600"}


# --- any host -----------------------------------------------------------------------------------------------

def test_warm_pool_cache_holds_pips_cache_and_mxnet_home():
    for cache in ("/opt/ml/sagemaker/warmpoolcache", "/opt/ml/sagemaker/warmpoolcache/"):
        effects = warm_pool_cache(job(env={"SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": cache}))
        assert settings(effects) == {"PIP_CACHE_DIR": "/opt/ml/sagemaker/warmpoolcache/pip",
                                     "MXNET_HOME": "/opt/ml/sagemaker/warmpoolcache/mxnet"}
        assert all("kept for the next job on this warm-pool instance" in effect.why for effect in effects)
    assert warm_pool_cache(job()) == [] == warm_pool_cache(job(env={"SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": ""}))


def test_program_environment_comes_from_the_programs_launch_module():
    rcnn = program_environment(job(facts=GPU8, sagemaker_program="faster_rcnn"))
    assert settings(rcnn)["MXNET_GPU_MEM_POOL_TYPE"] == "Round" and len(rcnn) == 7
    assert {effect.why for effect in rcnn} == {"tuned for faster_rcnn on GPUs"}
    assert program_environment(job(sagemaker_program="mask_rcnn")) == []  # CPU host
    assert program_environment(job(facts=GPU8)) == []  # mnist: no launch module


def test_horovod_hyperparameters():
    assert horovod_hyperparameters(job()) == []
    effects = horovod_hyperparameters(job(horovod_autotune="true", horovod_timeline="1", horovod_fusion_threshold_mb="32",
                                          horovod_cycle_time_ms="2.5"))
    assert settings(effects) == {
        "HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_LOG": "/opt/ml/output/data/horovod_autotune_log.csv",
        "HOROVOD_TIMELINE": "/opt/ml/output/data/horovod_timeline.json",
        "HOROVOD_FUSION_THRESHOLD": str(32 * 1024 * 1024), "HOROVOD_CYCLE_TIME": "2.5"}
    assert horovod_hyperparameters(job(horovod_autotune="False", horovod_timeline="false")) == []
    assert settings(horovod_hyperparameters(job(horovod_fusion_threshold_mb="0.5"))) == {
        "HOROVOD_FUSION_THRESHOLD": str(512 * 1024)}


def test_hang_watch_from_the_hyperparameters():
    assert settings(hang_watch(job(horovod_stall_timeout_s="10", mpi_progress_timeout_s="300"))) == {
        "HOROVOD_STALL_CHECK_TIME_SECONDS": "5", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "10",
        "SMMH_PROGRESS_TIMEOUT_S": "300"}
    assert hang_watch(job(horovod_stall_timeout_s="0")) == []


# --- GPU hosts ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gpus,ok", [
    (V100, True), ((("Tesla T4", "7.5"),), True), ((("NVIDIA A100-SXM4-40GB", "8.0"),), True),
    ((("NVIDIA A10G", "8.6"),), True), (H100, False), ((("Tesla K80", "3.7"),), False),
    (V100 + H100, False),
])
def test_gpu_compute_capability_check(gpus, ok):
    problem = gpu_support_problem(gpus, "50 60 70 80")
    assert (problem is None) == ok
    if not ok:
        assert "is not supported by this image's MXNet build, which has code for sm_50, sm_60, sm_70, sm_80" in problem
    assert gpu_support_problem(gpus, "50,60,70,80") == problem


def test_gpu_check_needs_an_arch_list_and_gpus():
    assert gpu_support_problem(H100, None) is None and gpu_support_problem(H100, "") is None  # CPU image
    assert gpu_support_problem((), "50 60 70 80") is None
    check_gpus_supported(HostFacts(cpu_count=1, gpus=H100), {})
    with pytest.raises(PlanError, match=r"^GPU 1 \(NVIDIA H100 80GB HBM3, compute capability 9.0\)"):
        check_gpus_supported(HostFacts(cpu_count=1, gpus=V100 + H100), {"SMMH_CUDA_ARCHS": "70 80"})


@pytest.mark.parametrize("driver,fusion_off", [("470.182.03", True), ("515.65.01", True), ("520.61.05", False),
                                               ("535.104.05", False), (None, False)])
def test_fusion_off_below_driver_520(driver, fusion_off):
    facts = HostFacts(cpu_count=64, gpu_count=8, nvidia_driver_version=driver, gpus=V100 * 8)
    effects = fusion_off_on_old_drivers(job(facts=facts))
    assert settings(effects) == ({"MXNET_USE_FUSION": "0"} if fusion_off else {})
    if fusion_off:
        assert effects[0].why == (f"NVIDIA driver {driver} < 520 cannot load the PTX of MXNet's runtime-compiled "
                                  "fused kernels")
    assert fusion_off_on_old_drivers(job(facts=HostFacts(cpu_count=2, nvidia_driver_version="470.1"))) == []


def test_nccl_debug():
    assert nccl_debug(job()) == []  # no NCCL on CPU hosts
    assert nccl_debug(job(facts=GPU8)) == [Setting(
        "NCCL_DEBUG", "WARN", "NCCL's warnings and errors; --NCCL_DEBUG=INFO in sagemaker_mpi_custom_mpi_options "
                              "for its setup details")]
    asked = job(sagemaker_mpi_custom_mpi_options="--NCCL_DEBUG=INFO")
    assert nccl_debug(asked) == [Setting("NCCL_DEBUG", "INFO", "--NCCL_DEBUG in sagemaker_mpi_custom_mpi_options",
                                         user_wins=False)]
    over = job(sagemaker_mpi_custom_mpi_options="--NCCL_DEBUG=INFO", env={"NCCL_DEBUG": "WARN"})
    assert nccl_debug(over)[0].why == "--NCCL_DEBUG in sagemaker_mpi_custom_mpi_options, over NCCL_DEBUG=WARN in the environment"


# --- MPI jobs -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("facts,per_host,threads", [
    (CPU2, "1", "2"), (CPU16, "4", "4"), (GPU8, "8", "8"),
    (CPU2, "3", "1"),  # never 0
])
def test_omp_threads_per_rank(facts, per_host, threads):
    effects = omp_threads_per_rank(two_hosts(facts=facts, sagemaker_mpi_num_of_processes_per_host=per_host))
    assert effects == [Setting("OMP_NUM_THREADS", threads, f"{facts.cpu_count} cores / {per_host} ranks per host")]


def test_no_omp_threads_for_a_single_process():
    assert omp_threads_per_rank(job(facts=CPU16)) == []  # MXNet's own default: every core


@pytest.mark.parametrize("facts,per_host,noted", [
    (CPU2, "1", "2"), (CPU16, "4", "4"), (CPU16, "2", None), (GPU8, "8", None),
    (HostFacts(cpu_count=9, interfaces=("eth0",)), "2", "4"),
])
def test_mpi_yield_when_idle_note(facts, per_host, noted):
    notes = mpi_yield_when_idle(two_hosts(facts=facts, sagemaker_mpi_num_of_processes_per_host=per_host))
    assert notes == ([f"mpi_yield_when_idle=1 ({noted} core(s) per rank: busy polling would starve it)"] if noted else [])


def test_mpi_yield_when_idle_no_note_without_mpi_or_when_the_user_chose():
    assert mpi_yield_when_idle(job()) == []
    assert mpi_yield_when_idle(two_hosts(env={"OMPI_MCA_mpi_yield_when_idle": "0"})) == []
    assert mpi_yield_when_idle(two_hosts(sagemaker_mpi_custom_mpi_options="--mca mpi_yield_when_idle 0")) == []


def test_nccl_socket_interface_follows_the_cluster_interface_under_mpi():
    assert nccl_socket_interface(two_hosts()) == [Setting("NCCL_SOCKET_IFNAME", "eth0", "the cluster interface")]
    assert nccl_socket_interface(job()) == []
    assert nccl_socket_interface(job(facts=HostFacts(cpu_count=2), sagemaker_mpi_num_of_processes_per_host="2")) == []


@pytest.mark.parametrize("instance_type", ["ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.g5.48xlarge",
                                           "ml.g6.48xlarge", "ml.g6e.24xlarge", "ml.g6e.48xlarge"])
def test_nccl_sockets_on_100g_hosts(instance_type):
    effects = nccl_sockets_on_100g(two_hosts(facts=GPU8, instance_type=instance_type))
    assert settings(effects) == {"NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "8"}
    assert int(effects[0].value) * int(effects[1].value) <= 64  # NCCL's cap on threads x sockets
    assert instance_type in effects[0].why and "no EFA plugin" in effects[0].why
    assert nccl_sockets_on_100g(job(facts=GPU8, instance_type=instance_type, sagemaker_mpi_enabled="false",
                                    sagemaker_mpi_num_of_processes_per_host="1")) == []


@pytest.mark.parametrize("instance_type", ["ml.p3.16xlarge", "ml.g5.12xlarge", "ml.g4dn.12xlarge", "ml.c5n.18xlarge",
                                           None])
def test_slower_links_keep_nccls_own_choice(instance_type):
    assert nccl_sockets_on_100g(two_hosts(facts=GPU8, instance_type=instance_type)) == []

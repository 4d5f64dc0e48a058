"""env_rules: each environment rule's branches, and how a rule's Settings become the plan's env and notes: what the user
sets, by any route, wins over a default and the note says so (the whole plan's precedence: test_job_plan_precedence.py)."""

import dataclasses

import pytest
from sagemaker_mxnet_horovod.core.exits import PlanError
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.plan.env_rules import (
    RULES,
    Setting,
    apply_rules,
    check_gpus_supported,
    fusion_off_on_old_drivers,
    gpu_support_problem,
    hang_watch,
    horovod_hyperparameters,
    nccl_debug,
    program_environment,
    straggler_report,
    warm_pool_cache,
)
from unit_helpers.rule_cases import GPU8, job, settings, two_hosts

V100 = (("Tesla V100-SXM2-16GB", "7.0"),)
H100 = (("NVIDIA H100 80GB HBM3", "9.0"),)


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


def test_the_backends_options_win_over_a_default_the_environment_and_the_hyperparameters_but_not_what_is_required():
    with_options = dataclasses.replace(job(env={"A": "7", "B": "7", "C": "7"}), options_env={"A": "5", "B": "5", "C": "5"})
    assert with_options.user_env == {"A": "5", "B": "5", "C": "5"}
    rules = (lambda job: [Setting("A", "1", "a default"), Setting("B", "2", "asked for", user_wins=False),
                          Setting("C", "3", "needed", required=True)],)
    env, notes = apply_rules(rules, with_options)
    assert env == {"C": "3"}
    assert notes == ["A=5 (set by you; default would be 1: a default)", "B=5 (set by you; default would be 2: asked for)",
                     "C=3 (needed)"]


def test_a_required_setting_replaces_the_containers_environment_too():
    env, notes = apply_rules((lambda job: [Setting("C", "3", "needed", required=True)],), job(env={"C": "7"}))
    assert env == {"C": "3"} and notes == ["C=3 (needed)"]


def test_notes_and_settings_keep_rule_order():
    rules = (lambda job: ["first"], lambda job: [Setting("B", "1", "b"), "third"], lambda job: [])
    assert apply_rules(rules, job()) == ({"B": "1"}, ["first", "B=1 (b)", "third"])


def test_a_new_default_rule_is_a_function_and_a_place_in_the_rules():
    def horovod_cycle_time_on_cpu(job):
        if job.facts.gpu_count or job.layout.distribution != "mpi":
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


def test_warm_pool_cache_keeps_cudas_jit_cache_on_gpu_hosts():
    effects = warm_pool_cache(job(facts=GPU8, env={"SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": "/wp"}))
    assert settings(effects) == {"PIP_CACHE_DIR": "/wp/pip", "MXNET_HOME": "/wp/mxnet", "CUDA_CACHE_PATH": "/wp/cuda"}


def test_program_environment_comes_from_the_programs_launch_module():
    rcnn = program_environment(job(facts=GPU8, sagemaker_program="faster_rcnn"))
    assert settings(rcnn)["MXNET_GPU_MEM_POOL_TYPE"] == "Round" and len(rcnn) == 7
    assert {effect.why for effect in rcnn} == {"GluonCV's train_faster_rcnn.py on GPUs"}
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


def test_gradient_compression_reaches_every_rank_and_none_sets_nothing():
    assert settings(horovod_hyperparameters(job(horovod_gradient_compression="FP16"))) == {
        "HOROVOD_GRADIENT_COMPRESSION": "fp16"}
    assert horovod_hyperparameters(job(horovod_gradient_compression="none")) == []


def test_the_straggler_report_is_written_under_output_data_in_every_mpi_job_unless_turned_off():
    # A step timed about every 10 s (at least 10 steps apart), or as often as horovod_straggler_every_s says.
    assert settings(straggler_report(two_hosts())) == {"SMMH_STRAGGLER_REPORT": "/opt/ml/output/data/straggler",
                                                        "SMMH_STRAGGLER_EVERY_S": "10"}
    assert settings(straggler_report(job(sagemaker_mpi_num_of_processes_per_host="2",
                                         horovod_straggler_every_s="2.5"))) == {
        "SMMH_STRAGGLER_REPORT": "/opt/ml/output/data/straggler", "SMMH_STRAGGLER_EVERY_S": "2.5"}
    assert settings(straggler_report(two_hosts(horovod_straggler_every_s="0")))["SMMH_STRAGGLER_EVERY_S"] == "0"
    assert straggler_report(two_hosts(horovod_straggler_report="false")) == []
    assert straggler_report(job()) == []  # one process: no rank to wait for
    # The user's own value wins (apply_rules), as for any default; the start log says so.
    env, notes = apply_rules((straggler_report,), two_hosts(env={"SMMH_STRAGGLER_REPORT": "off"}))
    assert env == {"SMMH_STRAGGLER_EVERY_S": "10"}
    assert notes[0].startswith("SMMH_STRAGGLER_REPORT=off (set by you; default would be /opt/ml/")


def test_the_straggler_report_is_off_in_a_parameter_server_job_and_the_start_log_says_so():
    assert straggler_report(two_hosts(sagemaker_parameter_server_enabled="true")) == [
        "straggler report: off in a parameter-server job (horovod_straggler_report times hvd.DistributedTrainer's "
        "allreduces; kvstore workers have none)"]


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

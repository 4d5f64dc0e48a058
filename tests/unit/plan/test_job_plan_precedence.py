"""job_plan.py's precedence: what the user sets reaches every rank unchanged, by whichever route (the job's
`environment`, -x NAME=VALUE or -x NAME in sagemaker_mpi_custom_mpi_options, --NCCL_DEBUG, the launcher's own
hyperparameter for a knob), and the start log names the default it replaced; -x, the more specific, wins over the
environment and over what the hyperparameters ask for; only what the job cannot run without is the launcher's. Read
as each rank gets it (rank_environment: MPI's ranks apply it from their host's file over what mpirun's -x set,
backends/mpi/test_rank_env.py; a parameter-server host's processes and the single process get it as it is). The table:
docs/launcher.md, "Who wins". Across containers: tests/integration (test_launcher_cluster.py, test_gloo_cluster.py,
test_parameter_server_cluster.py, test_warm_pool.py)."""

import pytest
from sagemaker_mxnet_horovod.act.rank_program import rank_environment
from unit_helpers.plan_cases import GPU8, config, options, plan

WARM = {"SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": "/wp"}  # the launcher plans MXNET_HOME=/wp/mxnet then
CONTAINER = {"PATH": "/usr/bin", **WARM}


def ranks(planned, env):
    return rank_environment(planned, env)


def noted(planned, name):
    return next(note for note in planned.notes if note.startswith(f"{name}="))


@pytest.mark.parametrize("current", ["algo-1", "algo-2"])
def test_x_options_reach_every_rank_on_every_host_over_the_launchers_defaults(current):
    hps = options("-x OMP_NUM_THREADS=3 -x MXNET_HOME=/mine -x HOROVOD_STALL_CHECK_TIME_SECONDS=9 -x MY_VAR=hello")
    planned = plan(config(hps, current=current), env=CONTAINER)
    env = ranks(planned, CONTAINER)
    assert {name: env[name] for name in ("OMP_NUM_THREADS", "MXNET_HOME", "HOROVOD_STALL_CHECK_TIME_SECONDS",
                                         "MY_VAR")} == {"OMP_NUM_THREADS": "3", "MXNET_HOME": "/mine",
                                                        "HOROVOD_STALL_CHECK_TIME_SECONDS": "9", "MY_VAR": "hello"}
    # 2 cores, 1 rank per host, each host on its own instance: 2 threads by default.
    assert noted(planned, "OMP_NUM_THREADS") == "OMP_NUM_THREADS=3 (set by you; default would be 2: 2 cores / 1 ranks " \
                                                "per host)"
    assert noted(planned, "MXNET_HOME").startswith("MXNET_HOME=/mine (set by you; default would be /wp/mxnet: ")
    assert noted(planned, "HOROVOD_STALL_CHECK_TIME_SECONDS").startswith(
        "HOROVOD_STALL_CHECK_TIME_SECONDS=9 (set by you; default would be 60: ")


def test_x_wins_over_the_environment_and_x_name_forwards_the_environments_value():
    container = {**CONTAINER, "OMP_NUM_THREADS": "2", "MXNET_HOME": "/from-environment", "PIP_CACHE_DIR": "/pip"}
    planned = plan(config(options("-x OMP_NUM_THREADS=3 -x MXNET_HOME -x PIP_CACHE_DIR")), env=container)
    env = ranks(planned, container)
    assert (env["OMP_NUM_THREADS"], env["MXNET_HOME"], env["PIP_CACHE_DIR"]) == ("3", "/from-environment", "/pip")
    assert noted(planned, "PIP_CACHE_DIR").startswith("PIP_CACHE_DIR=/pip (set by you; default would be /wp/pip")


def test_the_environment_wins_over_the_defaults_and_a_knobs_hyperparameter_reaches_the_ranks():
    container = {**CONTAINER, "OMP_NUM_THREADS": "5", "HOROVOD_STALL_CHECK_TIME_SECONDS": "7"}
    planned = plan(config({"horovod_fusion_threshold_mb": "8"}), env=container)
    env = ranks(planned, container)
    assert (env["OMP_NUM_THREADS"], env["HOROVOD_STALL_CHECK_TIME_SECONDS"]) == ("5", "7")
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(8 * 1024 * 1024)
    # Horovod's own variable, set by the user, wins over the launcher's knob that would set it.
    planned = plan(config({"horovod_cycle_time_ms": "5"}), env={**container, "HOROVOD_CYCLE_TIME": "10"})
    assert ranks(planned, {**container, "HOROVOD_CYCLE_TIME": "10"})["HOROVOD_CYCLE_TIME"] == "10"


def test_on_gpu_hosts_x_nccl_debug_is_kept_not_the_planned_warn():
    planned = plan(config(options("-x NCCL_DEBUG=INFO")), facts=GPU8)
    assert ranks(planned, {"PATH": "/usr/bin"})["NCCL_DEBUG"] == "INFO"
    assert noted(planned, "NCCL_DEBUG").startswith("NCCL_DEBUG=INFO (set by you; default would be WARN: ")


def test_x_wins_over_what_the_hyperparameters_ask_for_as_under_the_toolkit():
    # The toolkit passes --NCCL_DEBUG as -x NCCL_DEBUG=X before the custom options: a -x of the user's after it wins.
    hps = {**options("--NCCL_DEBUG=WARN -x NCCL_DEBUG=INFO -x HOROVOD_GRADIENT_COMPRESSION=none"),
           "horovod_gradient_compression": "fp16"}
    planned = plan(config(hps), facts=GPU8)
    env = ranks(planned, {"PATH": "/usr/bin"})
    assert (env["NCCL_DEBUG"], env["HOROVOD_GRADIENT_COMPRESSION"]) == ("INFO", "none")
    # Without -x, --NCCL_DEBUG wins over the environment (test_job_plan_toolkit_compat.py), and so does the knob.
    planned = plan(config({"horovod_gradient_compression": "fp16"}), env={"HOROVOD_GRADIENT_COMPRESSION": "none"})
    assert ranks(planned, {"HOROVOD_GRADIENT_COMPRESSION": "none"})["HOROVOD_GRADIENT_COMPRESSION"] == "fp16"


def test_what_the_job_cannot_run_without_is_the_launchers_on_every_route():
    # The master serves Gloo's rendezvous: another address would reach nobody. This host's SM_* are the toolkit's.
    hps = options("-x HOROVOD_CPU_OPERATIONS=gloo -x HOROVOD_GLOO_RENDEZVOUS_ADDR=10.0.0.9 -x SM_CURRENT_HOST=algo-9")
    for current in ("algo-1", "algo-2"):
        planned = plan(config(hps, current=current), env={"HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.8"})
        env = ranks(planned, {"HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.8"})
        assert (env["HOROVOD_GLOO_RENDEZVOUS_ADDR"], env["SM_CURRENT_HOST"]) == ("algo-1", current)
        assert env["HOROVOD_CPU_OPERATIONS"] == "gloo" and planned.gloo_rendezvous is not None


@pytest.mark.parametrize("hps", [{"sagemaker_parameter_server_enabled": "true"}, {"sagemaker_mpi_enabled": "false"}])
def test_without_mpirun_the_environment_wins_and_x_options_set_nothing(hps):
    # A parameter-server host's processes and the single process get the rank environment as it is.
    container = {**CONTAINER, "OMP_NUM_THREADS": "5", "MXNET_HOME": "/mine", "HOROVOD_STALL_CHECK_TIME_SECONDS": "7"}
    planned = plan(config({**hps, **options("-x MY_VAR=hello")}), env=container)
    env = ranks(planned, container)
    assert (env["OMP_NUM_THREADS"], env["MXNET_HOME"], env["HOROVOD_STALL_CHECK_TIME_SECONDS"]) == ("5", "/mine", "7")
    assert "MY_VAR" not in env
    assert noted(planned, "MXNET_HOME").startswith("MXNET_HOME=/mine (set by you; default would be /wp/mxnet: ")

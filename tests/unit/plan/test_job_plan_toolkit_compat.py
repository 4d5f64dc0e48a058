"""job_plan.py's rules for the sagemaker-training toolkit's contract: --NCCL_DEBUG in the custom MPI options, the
program's working directory, MPI options only where mpirun runs. (A topic of job_plan.py's tests, kept apart from
test_job_plan.py; the SM_* environment: compat/test_toolkit_env.py; stray output files: test_stray_outputs.py.)"""

from sagemaker_mxnet_horovod.act.rank_program import rank_environment
from unit_helpers.plan_cases import GPU8, config, options, plan

# --- --NCCL_DEBUG -----------------------------------------------------------------------------------------


def test_aws_horovod_example_options_on_master_and_worker():
    hps = {"sagemaker_mpi_enabled": "true", **options("-verbose --NCCL_DEBUG=INFO")}
    master = plan(config(hps))
    argv = list(master.command)
    assert "--NCCL_DEBUG=INFO" not in argv and "-verbose" in argv  # mpirun gets the rest
    assert argv.index("-verbose") < argv.index("sagemaker_mxnet_horovod.backends.mpi.rank_env")
    assert master.env["NCCL_DEBUG"] == "INFO" and "NCCL_DEBUG" in {argv[i + 1] for i, a in enumerate(argv)
                                                                     if a == "-x"}
    worker = plan(config(hps, current="algo-2"))
    assert rank_environment(worker, {"PATH": "/usr/bin"})["NCCL_DEBUG"] == "INFO"  # every rank on every host
    assert any("NCCL_DEBUG=INFO (--NCCL_DEBUG" in n for n in master.notes)


def test_nccl_debug_option_wins_over_the_environment():
    p = plan(config(options("--NCCL_DEBUG WARN")), env={"NCCL_DEBUG": "INFO"})
    assert p.env["NCCL_DEBUG"] == "WARN"
    assert rank_environment(p, {"NCCL_DEBUG": "INFO"})["NCCL_DEBUG"] == "WARN"
    assert any("over NCCL_DEBUG=INFO in the environment" in n for n in p.notes)


def test_nccl_debug_defaults_to_warn_on_gpus_only():
    assert plan(config(), facts=GPU8).env["NCCL_DEBUG"] == "WARN"
    assert "NCCL_DEBUG" not in plan(config(), facts=GPU8, env={"NCCL_DEBUG": "INFO"}).env  # yours wins
    assert "NCCL_DEBUG" not in plan(config()).env  # no NCCL on CPU hosts


# --- the program's working directory; MPI options --------------------------------------------------------


def test_every_rank_starts_in_the_code_directory():
    for cfg in (config(hosts=("algo-1",)), config()):
        argv = plan(cfg).command
        i = argv.index("-m") + 1  # the rank's start: act/rank_program.py, or the MPI backend's (backends/mpi/rank_env)
        assert argv[i].endswith((".rank_program", ".rank_env")) and argv[i + 1:i + 4] == ("/run/sagemaker-cluster", "/opt/ml/code", "--")


def test_mpi_options_count_only_when_mpirun_runs():
    hps = {"sagemaker_mpi_enabled": "false", **options("-x HOROVOD_TIMELINE=/opt/ml/output/t.json")}
    assert plan(config(hps, hosts=("algo-1",))).stray_outputs == ()

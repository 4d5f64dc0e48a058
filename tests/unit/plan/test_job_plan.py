"""job_plan.make_plan: the rules composed, end to end, for every shape of job (each rule's own branches: test_layout.py,
test_env_rules.py, backends/test_mpi.py, test_programs.py)."""

import json
import shlex

import pytest
from sagemaker_mxnet_horovod.backends.registry import plan_job
from sagemaker_mxnet_horovod.compat.debugger import read_configs
from sagemaker_mxnet_horovod.core.exits import ConfigError, PlanError
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.training_config import load_training_config
from sagemaker_mxnet_horovod.plan.job_plan import describe
from unit_helpers.job_plan_cases import (
    ENTRYPOINTS,
    GPU8,
    config,
    exported,
    mca,
    plan,
    program_part,
    rcnn_config,
)


def test_single_process_runs_program_without_mpi():
    p = plan(config(hps={"epochs": "3"}))
    assert p.role == "single" and p.backend == "single" and p.total_processes == 1
    assert p.command == ("/opt/venv/bin/python", "-m", "sagemaker_mxnet_horovod.act.rank_program", "/run/sagemaker-cluster",
                         "/opt/ml/code", "--", "/opt/venv/bin/python", f"{ENTRYPOINTS}/mnist.py", "--epochs", "3")
    assert "mpirun" not in p.command
    assert "OMP_NUM_THREADS" not in p.env


def test_two_hosts_one_process_each_master():
    p = plan(config(hosts=("algo-1", "algo-2")))
    assert p.role == "master" and p.backend == "mpi" and p.workers == ("algo-2",)
    argv = p.command
    assert argv[:4] == ("mpirun", "--allow-run-as-root", "--tag-output", "--host")
    # The master's own slots under its real hostname: Open MPI starts those locally.
    assert argv[4] == "c0ffee:1,algo-2:1"
    assert argv[argv.index("-np") + 1] == "2"
    assert "-bind-to" in argv and argv[argv.index("-bind-to") + 1] == "none"
    assert argv[argv.index("-map-by") + 1] == "slot"
    params = mca(argv)
    assert params["pml"] == "ob1" and params["btl"] == "^openib,ofi"
    assert params["btl_tcp_if_include"] == "eth0" and params["oob_tcp_if_include"] == "eth0"
    assert params["orte_abort_on_non_zero_status"] == "1"
    assert params["plm_rsh_no_tree_spawn"] == "1"
    assert "StrictHostKeyChecking=yes" in params["plm_rsh_args"]
    assert "IdentityFile=/run/sagemaker-cluster/id_ed25519" in params["plm_rsh_args"]
    assert "KexAlgorithms=curve25519-sha256," in params["plm_rsh_args"]
    assert params["mpi_yield_when_idle"] == "1"  # 2 cores, 1 rank: still below the threshold
    assert p.rank_hosts == ("algo-1", "algo-2")
    assert program_part(argv)[-2:] == ["/opt/venv/bin/python", f"{ENTRYPOINTS}/mnist.py"]


def test_worker_runs_no_command_but_has_rank_env():
    p = plan(config(hosts=("algo-1", "algo-2"), current="algo-2"))
    assert p.role == "worker" and p.command == ()
    assert p.master_host == "algo-1"
    assert p.rank_env["SM_CURRENT_HOST"] == "algo-2"


def test_two_hosts_two_processes():
    p = plan(config(hosts=("algo-1", "algo-2"), hps={"sagemaker_mpi_num_of_processes_per_host": "2"}))
    argv = p.command
    assert argv[4] == "c0ffee:2,algo-2:2" and argv[argv.index("-np") + 1] == "4"
    assert p.rank_hosts == ("algo-1", "algo-1", "algo-2", "algo-2")
    assert p.env["OMP_NUM_THREADS"] == "1"


def test_one_host_two_processes_needs_no_ssh_or_interface_flags():
    p = plan(config(hps={"sagemaker_mpi_num_of_processes_per_host": "2"}))
    params = mca(p.command)
    assert p.role == "master" and p.workers == ()
    assert "plm_rsh_args" not in params and "btl_tcp_if_include" not in params
    assert p.command[4] == "c0ffee:2"


def test_processes_default_to_gpu_count():
    p = plan(config(hosts=("algo-1", "algo-2")), facts=GPU8)
    assert p.processes_per_host == 8 and p.total_processes == 16
    assert p.env["OMP_NUM_THREADS"] == "8"
    assert "mpi_yield_when_idle" not in mca(p.command)  # 8 cores per rank: busy polling is affordable


def test_more_processes_than_gpus_is_an_error():
    with pytest.raises(PlanError, match="has 8 GPU.* more processes than slots"):
        plan(config(hps={"sagemaker_mpi_num_of_processes_per_host": "9"}), facts=GPU8)


def test_more_processes_than_cores_share_them_with_a_note():
    p = plan(config(hosts=("algo-1", "algo-2"), hps={"sagemaker_mpi_num_of_processes_per_host": "3"}))
    assert p.processes_per_host == 3 and p.total_processes == 6
    assert "algo-2:3" in p.command[p.command.index("--host") + 1]
    assert p.env["OMP_NUM_THREADS"] == "1"
    assert mca(p.command)["mpi_yield_when_idle"] == "1"
    assert any("=3 on 2 CPU core(s): the ranks share the cores (oversubscribed)" in n for n in p.notes), p.notes


def test_mpi_enabled_explicitly_on_one_process():
    p = plan(config(hps={"sagemaker_mpi_enabled": "true"}))
    assert p.backend == "mpi" and p.command[0] == "mpirun" and p.command[p.command.index("-np") + 1] == "1"


def test_mpi_disabled_on_two_hosts_runs_each_alone():
    p = plan(config(hosts=("algo-1", "algo-2"), current="algo-2", hps={"sagemaker_mpi_enabled": "False"}))
    assert p.role == "single" and p.backend == "single" and p.hosts == ("algo-2",)
    assert any("each of the 2 hosts" in n for n in p.notes)


def test_mpi_disabled_with_many_processes_is_an_error():
    with pytest.raises(PlanError, match="sagemaker_mpi_enabled=false cannot run 2 processes"):
        plan(config(hps={"sagemaker_mpi_enabled": "false", "sagemaker_mpi_num_of_processes_per_host": "2"}))


def test_interface_that_does_not_exist_falls_back_to_default_route():
    # SDK v3 local mode writes "ethwe", which compose does not create.
    p = plan(config(hosts=("algo-1", "algo-2"), interface="ethwe"))
    assert p.interface == "eth0"
    assert mca(p.command)["btl_tcp_if_include"] == "eth0"
    assert p.env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert p.rank_env["SM_NETWORK_INTERFACE_NAME"] == "eth0"
    assert any("'ethwe' does not exist" in n for n in p.notes)


def test_no_interface_for_multi_host_is_an_error():
    with pytest.raises(PlanError, match="no network interface"):
        plan(config(hosts=("algo-1", "algo-2")), facts=HostFacts(cpu_count=2))


def test_custom_mpi_options_keep_quoting_and_come_before_the_program():
    p = plan(config(hosts=("algo-1", "algo-2"),
                    hps={"sagemaker_mpi_custom_mpi_options": "-x NCCL_DEBUG=INFO -x 'MSG=hello world'"}))
    argv = list(p.command)
    i = argv.index("MSG=hello world")
    assert argv[i - 1] == "-x" and i < argv.index("sagemaker_mxnet_horovod.backends.mpi.rank_env")
    assert shlex.split(shlex.join(argv)) == argv


def test_user_mca_setting_replaces_ours():
    p = plan(config(hosts=("algo-1", "algo-2"),
                    hps={"sagemaker_mpi_custom_mpi_options": "-mca btl_tcp_if_include eth1 "
                                                             "-mca mpi_yield_when_idle 0"}))
    values = [p.command[i + 2] for i, a in enumerate(p.command) if a == "-mca" and p.command[i + 1] in
              ("btl_tcp_if_include", "mpi_yield_when_idle")]
    assert values == ["eth1", "0"]  # only the user's
    p = plan(config(hosts=("algo-1", "algo-2")), env={"OMPI_MCA_mpi_yield_when_idle": "0"})
    assert "mpi_yield_when_idle" not in mca(p.command)


def test_exported_environment():
    env = {"PATH": "/opt/venv/bin:/usr/bin", "LD_LIBRARY_PATH": "/x", "MXNET_HOME": "/m", "HOME": "/root",
           "AWS_REGION": "us-west-2", "NCCL_DEBUG": "INFO", "SECRET_THING": "no"}
    p = plan(config(hosts=("algo-1", "algo-2"), hps={"horovod_timeline": "true"}), env=env)
    names = exported(p.command)
    assert {"PATH", "LD_LIBRARY_PATH", "MXNET_HOME", "AWS_REGION", "NCCL_DEBUG", "OMP_NUM_THREADS",
            "HOROVOD_TIMELINE", "SM_CHANNEL_TRAIN", "SM_HOSTS", "NCCL_SOCKET_IFNAME"} <= names
    assert "HOME" not in names and "SECRET_THING" not in names


def test_user_environment_wins_over_defaults():
    env = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "7", "NCCL_SOCKET_IFNAME": "eth9"}
    p = plan(config(hosts=("algo-1", "algo-2")), env=env)
    assert "OMP_NUM_THREADS" not in p.env and "NCCL_SOCKET_IFNAME" not in p.env
    assert any(n.startswith("OMP_NUM_THREADS=7 (set by you") for n in p.notes)


def test_rcnn_gpu_defaults_from_its_launch_module_only_on_gpu_and_user_wins():
    p = plan(rcnn_config(), facts=GPU8, env={"MXNET_CUDNN_AUTOTUNE_DEFAULT": "1"})
    assert p.env["MXNET_GPU_MEM_POOL_TYPE"] == "Round"
    assert p.env["MXNET_GPU_COPY_NTHREADS"] == "1"
    assert "MXNET_CUDNN_AUTOTUNE_DEFAULT" not in p.env
    assert "MXNET_GPU_MEM_POOL_TYPE=Round (GluonCV's train_mask_rcnn.py on GPUs)" in p.notes
    assert p.env["MXNET_USE_FUSION"] == "0" and p.env["MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF"] == "28"
    assert "MXNET_GPU_MEM_POOL_TYPE" not in plan(rcnn_config()).env
    assert "MXNET_GPU_MEM_POOL_TYPE" not in plan(config(), facts=GPU8).env  # mnist has no launch module


def test_a_user_script_named_like_a_builtin_program_gets_none_of_its_rules():
    cfg = config(hps={"sagemaker_program": "mask_rcnn", "sagemaker_submit_directory": "/x", "horovod": "false"})
    p = plan(cfg, facts=GPU8)
    assert not p.program.builtin and p.processes_per_host == 8 and "MXNET_GPU_MEM_POOL_TYPE" not in p.env


def test_builtin_program_without_its_launch_module_is_refused(tmp_path):
    with pytest.raises(PlanError, match="the launch rules of mask_rcnn are missing: no .*/mxnet_programs/launch.py"):
        plan(rcnn_config(entrypoints_dir=str(tmp_path)), entrypoints_dir=str(tmp_path))


def test_horovod_knobs():
    p = plan(config(hosts=("algo-1", "algo-2"), hps={
        "horovod_autotune": "true", "horovod_timeline": "1", "horovod_fusion_threshold_mb": "32",
        "horovod_cycle_time_ms": "2.5"}))
    assert p.env["HOROVOD_AUTOTUNE"] == "1"
    assert p.env["HOROVOD_AUTOTUNE_LOG"] == "/opt/ml/output/data/horovod_autotune_log.csv"
    assert p.env["HOROVOD_TIMELINE"] == "/opt/ml/output/data/horovod_timeline.json"
    assert p.env["HOROVOD_FUSION_THRESHOLD"] == str(32 * 1024 * 1024)
    assert p.env["HOROVOD_CYCLE_TIME"] == "2.5"
    off = plan(config(hosts=("algo-1", "algo-2"), hps={"horovod_autotune": "False"}))
    assert "HOROVOD_AUTOTUNE" not in off.env


def test_no_efa_environment_on_efa_instance_types():
    # The image has no NCCL EFA plugin: claiming EFA (FI_PROVIDER=efa, NCCL_PROTO=simple) would change
    # nothing but what the start log says.
    for instance_type in ("ml.p4d.24xlarge", "ml.p3dn.24xlarge", "ml.g4dn.12xlarge", "ml.c5n.18xlarge"):
        p = plan(config(hosts=("algo-1", "algo-2"), instance_type=instance_type), facts=GPU8)
        assert not {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_PROTO"} & set(p.env), instance_type


def test_nccl_socket_transport_on_100_gbps_hosts():
    for instance_type in ("ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.g5.48xlarge"):
        p = plan(config(hosts=("algo-1", "algo-2"), instance_type=instance_type), facts=GPU8)
        assert (p.env["NCCL_SOCKET_NTHREADS"], p.env["NCCL_NSOCKS_PERTHREAD"]) == ("4", "8"), instance_type
        assert {"NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"} <= exported(p.command)
        # NCCL caps threads x sockets at 64.
        assert int(p.env["NCCL_SOCKET_NTHREADS"]) * int(p.env["NCCL_NSOCKS_PERTHREAD"]) <= 64
    # Slower links keep NCCL's own choice.
    for instance_type in ("ml.p3.16xlarge", "ml.g5.12xlarge", "ml.g4dn.12xlarge", "ml.c5.xlarge", None):
        p = plan(config(hosts=("algo-1", "algo-2"), instance_type=instance_type), facts=GPU8)
        assert "NCCL_SOCKET_NTHREADS" not in p.env and "NCCL_NSOCKS_PERTHREAD" not in p.env, instance_type
    # A value the user set wins, and the other default still applies.
    p = plan(config(hosts=("algo-1", "algo-2"), instance_type="ml.p4d.24xlarge"), facts=GPU8,
             env={"PATH": "/usr/bin", "NCCL_SOCKET_NTHREADS": "2"})
    assert "NCCL_SOCKET_NTHREADS" not in p.env and p.env["NCCL_NSOCKS_PERTHREAD"] == "8"
    assert "NCCL_SOCKET_NTHREADS" in exported(p.command)


def test_no_libfabric_btl_on_any_instance_type():
    # Measured cost (~1.5 s per job) and no EFA path this image can use: off everywhere.
    for instance_type in ("ml.p4d.24xlarge", "ml.c5n.18xlarge", "ml.p3.16xlarge", "ml.c5.xlarge"):
        p = plan(config(hosts=("algo-1", "algo-2"), instance_type=instance_type), facts=GPU8)
        assert mca(p.command)["btl"] == "^openib,ofi", instance_type
    # A btl the user chose replaces ours (e.g. to try the ofi BTL on EFA).
    custom = plan(config(hosts=("algo-1", "algo-2"), hps={"sagemaker_mpi_custom_mpi_options": "-mca btl ^openib"}))
    assert "^openib,ofi" not in custom.command and custom.command.count("btl") == 1


def test_toolkit_compatible_sm_environment():
    cfg = config(hosts=("algo-1", "algo-2"), hps={"batch-size": "64", "lr": "0.1"},
                 channels={"train": {"TrainingInputMode": "Pipe"}, "test": {}})
    env = plan(cfg).rank_env
    assert json.loads(env["SM_HOSTS"]) == ["algo-1", "algo-2"]
    assert env["SM_CURRENT_HOST"] == "algo-1"
    assert env["SM_CHANNEL_TRAIN"] == "/opt/ml/input/data/train"
    assert json.loads(env["SM_CHANNELS"]) == ["test", "train"]
    assert env["SM_MODEL_DIR"] == "/opt/ml/model" and env["SM_OUTPUT_DATA_DIR"] == "/opt/ml/output/data"
    assert env["SM_NUM_GPUS"] == "0" and env["SM_NUM_CPUS"] == "2"
    assert json.loads(env["SM_HPS"]) == {"batch-size": 64, "lr": 0.1}  # JSON types; no launcher keys
    assert env["SM_HP_BATCH-SIZE"] == "64"
    assert json.loads(env["SM_USER_ARGS"]) == ["--batch-size", "64", "--lr", "0.1"]
    assert json.loads(env["SM_FRAMEWORK_PARAMS"]) == {}  # sagemaker_program is the toolkit's own
    assert env["SM_CURRENT_INSTANCE_GROUP"] == "homogeneousCluster" and env["SM_CURRENT_INSTANCE_TYPE"] == "local"
    assert env["SM_LOG_LEVEL"] == "20" and env["SM_NUM_NEURONS"] == "0" and env["SM_FRAMEWORK_MODULE"] == ""
    assert env["SM_MODULE_DIR"] == "/opt/ml/code" and env["SM_MODULE_NAME"] == "mnist"
    assert json.loads(env["SM_INPUT_DATA_CONFIG"])["train"]["TrainingInputMode"] == "Pipe"
    training_env = json.loads(env["SM_TRAINING_ENV"])
    assert training_env["current_host"] == "algo-1" and training_env["hosts"] == ["algo-1", "algo-2"]


def test_a_debugger_or_profiler_configuration_is_a_note_and_a_broken_one_no_error(tmp_path):
    config_dir = tmp_path / "input" / "config"
    config_dir.mkdir(parents=True)
    (config_dir / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1"]}))
    (config_dir / "hyperparameters.json").write_text(json.dumps({"sagemaker_program": "mnist"}))
    (config_dir / "debughookconfig.json").write_text(json.dumps({"S3OutputPath": "s3://b/job/debug-output"}))
    (config_dir / "profilerconfig.json").write_text("{cut short")
    env = {"SAGEMAKER_BASE_DIR": str(tmp_path)}
    notes = plan(load_training_config(env, ENTRYPOINTS, read_configs(config_dir))).notes
    assert notes[0].startswith("SageMaker Debugger hook configuration (debughookconfig.json): collections losses "
                               "(smdebug's default); every 500 steps; saved by rank 0 (include_workers one) to "
                               "/opt/ml/output/tensors, which SageMaker uploads to s3://b/job/debug-output.")
    assert notes[1].startswith("SageMaker Profiler: profilerconfig.json cannot be read (")
    (config_dir / "debughookconfig.json").unlink()
    (config_dir / "profilerconfig.json").unlink()
    notes = plan(load_training_config(env, ENTRYPOINTS, read_configs(config_dir))).notes
    assert not any(note.startswith(("SageMaker Debugger", "SageMaker Profiler")) for note in notes)


def test_describe_lists_role_hosts_command_and_notes():
    p = plan(config(hosts=("algo-1", "algo-2"), interface="ethwe"))
    text = describe(p, {"PATH": "/usr/bin"})
    assert "role: master" in text and "hosts: algo-1:1, algo-2:1" in text
    assert "command: mpirun " in text and "OMP_NUM_THREADS=2" in text
    assert "note: network_interface_name 'ethwe' does not exist" in text
    assert "rank logs: /opt/ml/output/data/logs/<host>-rank-<rank>.log; console: every rank" in text
    shown = describe(plan(config(hosts=("algo-1", "algo-2"), hps={"mpi_console_ranks": "0,3"})), {})
    assert "console: ranks 0, 3 (mpi_console_ranks)" in shown


V100 = (("Tesla V100-SXM2-16GB", "7.0"),)
H100 = (("NVIDIA H100 80GB HBM3", "9.0"),)


def test_h100_refused_with_failure_naming_gpu():
    facts = HostFacts(cpu_count=96, gpu_count=8, interfaces=("eth0",), default_route_interface="eth0",
                      nvidia_driver_version="550.54.15", gpus=H100 * 8)
    with pytest.raises(PlanError, match=r"GPU 0 \(NVIDIA H100 80GB HBM3, compute capability 9.0\)"):
        plan_job(config(), facts, {"SMMH_CUDA_ARCHS": "50 60 70 80"})
    assert plan_job(config(), facts, {}).processes_per_host == 8  # no arch list (CPU image): no check


@pytest.mark.parametrize("driver,fusion_off", [("470.182.03", True), ("515.65.01", True), ("520.61.05", False),
                                               ("535.104.05", False)])
def test_fusion_off_below_driver_520(driver, fusion_off):
    facts = HostFacts(cpu_count=64, gpu_count=8, interfaces=("eth0",), default_route_interface="eth0",
                      nvidia_driver_version=driver, gpus=V100 * 8)
    p = plan_job(config(), facts, {})
    assert (p.env.get("MXNET_USE_FUSION") == "0") == fusion_off
    if fusion_off:
        assert any("driver" in n and "< 520" in n for n in p.notes)
    assert "MXNET_USE_FUSION" not in plan_job(config(), facts, {"MXNET_USE_FUSION": "1"}).env


def test_rcnn_horovod_false_runs_one_process_without_mpi():
    p = plan(rcnn_config(horovod="False"), facts=GPU8)
    assert p.role == "single" and p.backend == "single" and p.processes_per_host == 1
    assert "mpirun" not in p.command and p.command[-2:] == ("--horovod", "False")
    assert any("horovod=false" in n for n in p.notes)
    assert plan(rcnn_config(horovod="true"), facts=GPU8).processes_per_host == 8


def test_rcnn_horovod_false_on_two_hosts_is_an_error():
    with pytest.raises(PlanError, match="horovod=false runs one process on one host; this job has 2 hosts"):
        plan(rcnn_config(hosts=("algo-1", "algo-2"), horovod="0"), facts=GPU8)
    with pytest.raises(PlanError, match="horovod=false runs one process without MPI"):
        plan(rcnn_config(horovod="false", sagemaker_mpi_num_of_processes_per_host="2"), facts=GPU8)
    with pytest.raises(ConfigError, match="horovod='maybe' is not a boolean"):
        plan(rcnn_config(horovod="maybe"), facts=GPU8)


def test_warm_pool_cache_holds_pips_cache_and_mxnet_home():
    warm = {"SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": "/opt/ml/sagemaker/warmpoolcache/"}
    for p in (plan(config(), env=warm), plan(config(hosts=("algo-1", "algo-2")), env=warm)):
        assert p.env["PIP_CACHE_DIR"] == "/opt/ml/sagemaker/warmpoolcache/pip"
        assert p.env["MXNET_HOME"] == "/opt/ml/sagemaker/warmpoolcache/mxnet"
        assert any(n.startswith("MXNET_HOME=") and "warm-pool" in n for n in p.notes)
    # Every rank sees MXNET_HOME (GluonCV reads it there), on other hosts too.
    assert "MXNET_HOME" in exported(plan(config(hosts=("algo-1", "algo-2")), env=warm).command)
    # Not a warm-pool job (unset or empty): pip and MXNet keep their defaults.
    for env in ({}, {"SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY": ""}):
        p = plan(config(), env={"PATH": "/usr/bin", **env})
        assert "PIP_CACHE_DIR" not in p.env and "MXNET_HOME" not in p.env
    # A value the user set wins.
    p = plan(config(), env={**warm, "MXNET_HOME": "/data/mxnet", "PIP_CACHE_DIR": "/data/pip"})
    assert "MXNET_HOME" not in p.env and "PIP_CACHE_DIR" not in p.env


def test_notes_in_order_config_layout_environment_rules_then_stray_outputs():
    hps = {"sagemaker_mpi_num_of_processes_per_host": "3", "horovod_unknown": "1",
           "sagemaker_mpi_custom_mpi_options": "-x HOROVOD_TIMELINE=/opt/ml/output/timeline.json"}
    p = plan(config(hosts=("algo-1", "algo-2"), interface="ethwe", hps=hps))
    assert [note.split("=")[0].split(" ")[0] for note in p.notes] == [
        "unknown",  # the config's warnings
        "sagemaker_mpi_num_of_processes_per_host", "network_interface_name",  # layout
        "SMMH_STRAGGLER_REPORT", "SMMH_STRAGGLER_EVERY_S", "HOROVOD_STALL_CHECK_TIME_SECONDS",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "OMP_NUM_THREADS",  # environment
        "mpi_yield_when_idle", "1", "NCCL_SOCKET_IFNAME",  # "1 core per rank across hosts: ..."
        "WARNING",  # files SageMaker would not upload
    ]

"""Inside the image: the SM_* environment and arguments of our ranks against the sagemaker-training toolkit's own
(`Environment().to_env_vars()`, `to_cmd_args()`), for several configurations and from every host's view.

The toolkit reads SAGEMAKER_BASE_DIR when it is imported, so it runs in a subprocess per configuration, with
the config files in a temp dir. Our side is the launcher's plan for that host (rank_environment: what every
rank of that host gets) and, where a job fits in one container (one host, or MPI off), a real
`train` run whose user script records what it got. The only differences allowed are the deliberate ones listed
in docs/compatibility.md, each patched into the toolkit's values below with its reason.
"""

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

pytest.importorskip("sagemaker_training")
from sagemaker_mxnet_horovod.act.rank_program import rank_environment  # noqa: E402
from sagemaker_mxnet_horovod.backends.registry import plan_job  # noqa: E402
from sagemaker_mxnet_horovod.parse import host_facts  # noqa: E402
from sagemaker_mxnet_horovod.parse.settings import LAUNCHER_PREFIXES  # noqa: E402
from sagemaker_mxnet_horovod.parse.training_config import load_training_config  # noqa: E402

CODE = Path(__file__).parent / "code"
# Our additions: the toolkit does not set these.
EXTRA = {"SM_MASTER_ADDR", "SM_CHECKPOINT_DIR"}

# Hyperparameters of every JSON type, as SDK v2 writes them (each value JSON-encoded), plus strings a
# hand-written file holds (not JSON: they stay strings).
USER_HPS = {
    "epochs": json.dumps(3), "lr": json.dumps(0.05), "use-fpn": json.dumps(True), "resume": json.dumps(False),
    "network": json.dumps("resnet50_v1b"), "layers": json.dumps([1, 2, "x"]), "opts": json.dumps({"b": 1, "a": [2]}),
    "nothing": json.dumps(None), "as-text": json.dumps("42"), "float-text": json.dumps("0.10"), "k": json.dumps(7),
    "hand_written_bool": "False", "hand_written_list": "17,23", "hand_written_zero": "007", "empty": "",
    "sci": "1e-4", "neg": "-2",
}
SAGEMAKER_HPS = {
    "sagemaker_program": json.dumps("dump_env.py"), "sagemaker_container_log_level": json.dumps(20),
    "sagemaker_job_name": json.dumps("compat-job"), "sagemaker_region": json.dumps("us-west-2"),
    "sagemaker_estimator_class_name": json.dumps("MXNet"), "sagemaker_estimator_module": json.dumps("sagemaker.mxnet"),
}
CHANNELS = {
    "train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
    "test": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key"},
    "extra-data": {"TrainingInputMode": "FastFile", "ContentType": "application/x-recordio"},
}
GROUPS2 = [{"instance_group_name": "train", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1", "algo-2"]}]
HETERO = [{"instance_group_name": "train", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1", "algo-2"]},
          {"instance_group_name": "data", "instance_type": "ml.m5.large", "hosts": ["algo-3"]}]


def mpi(**extra):
    return {"sagemaker_mpi_enabled": json.dumps(True), "sagemaker_mpi_num_of_processes_per_host": json.dumps(1),
            "sagemaker_mpi_custom_mpi_options": json.dumps("-verbose --NCCL_DEBUG=INFO"), **extra}


# name: (hosts, resourceconfig extras, hyperparameters, channels)
CONFIGS = {
    "one-host-mpi": (["algo-1"], {}, {**USER_HPS, **SAGEMAKER_HPS, **mpi()}, CHANNELS),
    "one-host-no-config-extras": (["algo-1"], None, {"sagemaker_program": "dump_env.py", "epochs": "1"}, {}),
    "two-hosts-mpi-groups": (
        ["algo-1", "algo-2"],
        {"network_interface_name": "eth0", "current_instance_type": "ml.c5.xlarge", "current_group_name": "train",
         "instance_groups": GROUPS2},
        {**USER_HPS, **SAGEMAKER_HPS, **mpi()}, CHANNELS),
    "two-hosts-mpi-off": (["algo-1", "algo-2"], {"current_instance_type": "ml.c5.xlarge"},
                          {**USER_HPS, **SAGEMAKER_HPS, "sagemaker_mpi_enabled": json.dumps(False)},
                          {"train": CHANNELS["train"]}),
    "hetero-groups": (
        ["algo-1", "algo-2", "algo-3"],
        {"network_interface_name": "eth0", "instance_groups": HETERO},
        {**USER_HPS, **SAGEMAKER_HPS, **mpi(sagemaker_distribution_instance_groups=json.dumps(["train"]))},
        CHANNELS),
    # Deliberate differences: an interface that does not exist, the launcher's own keys, "False".
    "deliberate-differences": (
        ["algo-1", "algo-2"], {"network_interface_name": "ethwe"},
        {**USER_HPS, **SAGEMAKER_HPS, "sagemaker_mpi_enabled": "False", "horovod_timeline": "true",
         "mpi_peer_timeout_s": "60"}, CHANNELS),
}
# Group membership for each host of the hetero configuration.
HETERO_GROUP = {"algo-1": "train", "algo-2": "train", "algo-3": "data"}


def views():
    for name, (hosts, _, _, _) in CONFIGS.items():
        for host in hosts:
            yield pytest.param(name, host, id=f"{name}@{host}")


def write_config(base: Path, name: str, host: str) -> dict:
    hosts, extras, hps, channels = CONFIGS[name]
    config_dir = base / "input" / "config"
    config_dir.mkdir(parents=True)
    resource = {"current_host": host, "hosts": hosts, **(extras or {})}
    if name == "hetero-groups":
        resource["current_group_name"] = HETERO_GROUP[host]
        resource["current_instance_type"] = next(g["instance_type"] for g in HETERO
                                                 if g["instance_group_name"] == HETERO_GROUP[host])
    if extras is not None:
        (config_dir / "resourceconfig.json").write_text(json.dumps(resource))
    else:  # SageMaker always writes it; a bare one, as hand-made local setups do
        (config_dir / "resourceconfig.json").write_text(json.dumps({"current_host": host, "hosts": hosts}))
    submit = {"sagemaker_submit_directory": json.dumps(str(CODE))}
    (config_dir / "hyperparameters.json").write_text(json.dumps({**hps, **submit}))
    (config_dir / "inputdataconfig.json").write_text(json.dumps(channels))
    for channel in channels:
        (base / "input" / "data" / channel).mkdir(parents=True)
    return {k: v for k, v in os.environ.items() if not k.startswith("SM_")} | {
        "SAGEMAKER_BASE_DIR": str(base), "TRAINING_JOB_NAME": "compat-job", "SMMH_RUN_DIR": str(base / "run")}


TOOLKIT_SCRIPT = """
import json
from sagemaker_training import environment
env = environment.Environment()
print(json.dumps({"env": env.to_env_vars(), "args": env.to_cmd_args()}))
"""


@dataclass(frozen=True)
class HostView:
    """What this container offers a job, read by the test itself: the expected SM_NUM_CPUS and interface must
    not come from facts.gather, which the launcher's values come from."""
    cpus: int  # the CPUs this process may use: its affinity, capped by the cgroup's CPU quota
    interfaces: frozenset  # the network interfaces, loopback excluded
    default_route_interface: str | None


def allowed_cpus() -> int:
    """The CPUs in /proc/self/status's Cpus_allowed_list (e.g. "0-3,6"), capped by a cgroup v2 cpu.max or v1
    cfs quota (whole CPUs, rounded up)."""
    allowed = next(line.split(":", 1)[1] for line in Path("/proc/self/status").read_text().splitlines()
                   if line.startswith("Cpus_allowed_list:"))
    count = 0
    for part in allowed.strip().split(","):
        first, _, last = part.partition("-")
        count += int(last or first) - int(first) + 1
    quota = period = None
    v2, v1 = Path("/sys/fs/cgroup/cpu.max"), Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
    if v2.is_file() and not v2.read_text().startswith("max"):
        quota, period = map(int, v2.read_text().split())
    elif v1.is_file() and int(v1.read_text()) > 0:
        quota, period = int(v1.read_text()), int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
    return min(count, -(-quota // period)) if quota else count


def this_host() -> HostView:
    names = frozenset(name for _, name in socket.if_nameindex() if name != "lo")
    # /proc/net/route: the default route is destination 0.0.0.0 with mask 0.0.0.0; the lowest metric wins.
    routes = [line.split() for line in Path("/proc/net/route").read_text().splitlines()[1:]]
    defaults = sorted((int(r[6]), r[0]) for r in routes if len(r) > 7 and r[1] == r[7] == "00000000")
    return HostView(allowed_cpus(), names, defaults[0][1] if defaults else None)


def toolkit_view(env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", TOOLKIT_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def expected_from_toolkit(toolkit: dict, host: HostView) -> tuple[dict, list]:
    """The toolkit's values with our documented differences (docs/compatibility.md) applied."""
    env, args = dict(toolkit["env"]), list(toolkit["args"])
    training_env = json.loads(env["SM_TRAINING_ENV"])
    resource = training_env["resource_config"]

    def set_both(variable, key, value):
        env[variable] = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
        training_env[key] = value

    # The CPUs this container may use (affinity, cgroup quota); the toolkit counts the machine's.
    set_both("SM_NUM_CPUS", "num_cpus", host.cpus)
    # The interface the job uses: the config's if it exists, else the default route's.
    requested = resource.get("network_interface_name")
    if requested not in host.interfaces:
        set_both("SM_NETWORK_INTERFACE_NAME", "network_interface_name", host.default_route_interface)
    # horovod_* and mpi_* are the launcher's knobs, not the program's hyperparameters.
    hps = {k: v for k, v in training_env["hyperparameters"].items() if not k.startswith(LAUNCHER_PREFIXES)}
    if hps != training_env["hyperparameters"]:
        for key in set(training_env["hyperparameters"]) - set(hps):
            del env[f"SM_HP_{key.upper()}"]
            i = args.index(f"--{key}")
            del args[i:i + 2]
        set_both("SM_HPS", "hyperparameters", hps)
        env["SM_USER_ARGS"] = json.dumps(args, sort_keys=True, separators=(",", ":"))
    # sagemaker_mpi_enabled="False" is false (the toolkit: a non-empty string, so true).
    if training_env["additional_framework_parameters"].get("sagemaker_mpi_enabled") == "False":
        set_both("SM_DISTRIBUTION_INSTANCE_GROUPS", "distribution_instance_groups", [])
        training_env["distribution_hosts"] = [] if resource.get("instance_groups") else training_env["hosts"]
    env["SM_TRAINING_ENV"] = json.dumps(training_env, sort_keys=True, separators=(",", ":"))
    return env, args


def assert_same(ours: dict, expected: dict):
    ours_sm = {k: v for k, v in ours.items() if k.startswith("SM_")}
    assert set(ours_sm) - set(expected) == EXTRA
    assert not set(expected) - set(ours_sm), "SM_* variables the toolkit sets and we do not"
    assert json.loads(ours_sm["SM_TRAINING_ENV"]) == json.loads(expected["SM_TRAINING_ENV"])
    assert {k: ours_sm[k] for k in expected} == expected


@pytest.mark.parametrize("name,host", list(views()))
def test_rank_environment_matches_the_toolkit(tmp_path, name, host):
    env = write_config(tmp_path, name, host)
    toolkit = toolkit_view(env)
    facts = host_facts.gather(env)
    plan = plan_job(load_training_config(env), facts, env, python=sys.executable,
                    run_dir=env["SMMH_RUN_DIR"])
    expected_env, expected_args = expected_from_toolkit(toolkit, this_host())
    assert_same(rank_environment(plan, env), expected_env)
    assert list(plan.program.argv[2:]) == expected_args
    if "NCCL_DEBUG" in CONFIGS[name][2].get("sagemaker_mpi_custom_mpi_options", ""):
        assert rank_environment(plan, env)["NCCL_DEBUG"] == "INFO"


RUNNABLE = ["one-host-mpi@algo-1", "one-host-no-config-extras@algo-1", "two-hosts-mpi-off@algo-1",
            "two-hosts-mpi-off@algo-2"]


def on_one_cpu() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


@pytest.mark.parametrize("view", RUNNABLE)
def test_real_train_run_matches_the_toolkit(tmp_path, view):
    """`train` for real: the script gets the toolkit's environment and arguments, in the code directory.
    `train` runs pinned to one CPU (as `docker run --cpuset-cpus` would): SM_NUM_CPUS must say 1 where the
    toolkit counts the machine's CPUs."""
    name, host = view.split("@")
    env = write_config(tmp_path, name, host)
    toolkit = toolkit_view(env)
    done = subprocess.run(["train"], env=env, capture_output=True, text=True, timeout=300, preexec_fn=on_one_cpu)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "output" / "data" / "rank-0.json").read_text())
    expected_env, expected_args = expected_from_toolkit(toolkit, replace(this_host(), cpus=1))
    assert record["cwd"] == str(tmp_path / "code") and record["data"] == "next to the script"
    assert record["argv"] == expected_args
    assert_same(record["env"], expected_env)
    if name == "one-host-mpi":  # AWS's '-verbose --NCCL_DEBUG=INFO', through a real mpirun
        assert record["env"]["NCCL_DEBUG"] == "INFO"
        assert "-verbose" in done.stderr and "--NCCL_DEBUG" not in done.stderr.split("command: ")[1].split("\n")[0]

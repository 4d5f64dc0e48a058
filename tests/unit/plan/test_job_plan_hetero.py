"""job_plan.make_plan on a heterogeneous cluster (a topic of test_job_plan.py): MPI spans the distribution instance
groups' hosts; the other hosts run the program alone."""

import json

from sagemaker_mxnet_horovod.parse.training_config import parse_training_config
from sagemaker_mxnet_horovod.plan.job_plan import describe
from unit_helpers.job_plan_cases import (
    ENTRYPOINTS,
    GPU8,
    PATHS,
    plan,
)

# ---------------------------------------------------------------------------------------------------------
# Heterogeneous clusters: MPI spans the distribution instance groups' hosts; other hosts run the program alone.

TRAIN_AND_DATA = (("train", ("algo-1", "algo-2")), ("data", ("algo-3",)))
DATA_FIRST = (("data", ("algo-1",)), ("train", ("algo-2", "algo-3")))


def hetero(current, groups=TRAIN_AND_DATA, distribution=("train",), hps=None):
    resource = {"current_host": current, "hosts": sorted(h for _, hs in groups for h in hs),
                "network_interface_name": "eth0", "current_instance_type": "ml.c5.xlarge",
                "current_group_name": next(name for name, hs in groups if current in hs),
                "instance_groups": [{"instance_group_name": name, "instance_type": "ml.c5.xlarge", "hosts": list(hs)}
                                    for name, hs in groups]}
    all_hps = {"sagemaker_program": "mnist", **(hps or {})}
    if distribution is not None:
        all_hps["sagemaker_distribution_instance_groups"] = json.dumps(list(distribution))
    return parse_training_config(PATHS, resource, all_hps, {"train": {}}, {}, entrypoints_dir=ENTRYPOINTS)


def test_hetero_master_runs_mpi_on_the_distribution_hosts_only():
    p = plan(hetero("algo-1"))
    assert p.role == "master" and p.master_host == "algo-1"
    assert p.hosts == ("algo-1", "algo-2") and p.workers == ("algo-2",)
    assert p.command[4] == "c0ffee:1,algo-2:1" and p.command[p.command.index("-np") + 1] == "2"
    assert p.rank_hosts == ("algo-1", "algo-2") and p.total_processes == 2
    assert p.role_reason == ""


def test_hetero_worker_serves_the_distribution_master():
    p = plan(hetero("algo-2"))
    assert p.role == "worker" and p.master_host == "algo-1" and p.command == ()


def test_hetero_host_outside_the_distribution_runs_the_program_alone():
    p = plan(hetero("algo-3", hps={"sagemaker_mpi_num_of_processes_per_host": "2"}))
    assert p.role == "single" and p.backend == "single" and p.workers == ()
    assert p.hosts == ("algo-3",) and p.processes_per_host == 1 and p.total_processes == 1
    assert "mpirun" not in p.command
    assert p.command[-2:] == ("/opt/venv/bin/python", f"{ENTRYPOINTS}/mnist.py")
    assert p.role_reason == (
        "outside the distribution: instance group 'data' is not in sagemaker_distribution_instance_groups "
        "['train']; runs the program on its own, one process (MPI runs on algo-1, algo-2, master algo-1)")
    text = describe(p, {"PATH": "/usr/bin"})
    assert text.splitlines()[0] == "role: single (" + p.role_reason + ")"


def test_hetero_outside_host_skips_the_slot_checks_of_the_distribution_hosts():
    # A 2-core data host in a job whose training hosts run 8 ranks each: not "more processes than slots".
    p = plan(hetero("algo-3", hps={"sagemaker_mpi_num_of_processes_per_host": "8"}))
    assert p.role == "single" and p.processes_per_host == 1
    # A training host with fewer cores than ranks shares them (CPU hosts are not refused), and says so.
    training = plan(hetero("algo-1", hps={"sagemaker_mpi_num_of_processes_per_host": "8"}))
    assert training.processes_per_host == 8 and any("oversubscribed" in note for note in training.notes)
    assert not any("oversubscribed" in note for note in p.notes)


def test_hetero_master_is_the_first_distribution_host_not_hosts0():
    master = plan(hetero("algo-2", groups=DATA_FIRST))
    assert master.role == "master" and master.master_host == "algo-2" and master.workers == ("algo-3",)
    assert master.command[4] == "c0ffee:1,algo-3:1"
    assert json.loads(master.rank_env["SM_TRAINING_ENV"])["master_hostname"] == "algo-2"
    worker = plan(hetero("algo-3", groups=DATA_FIRST))
    assert worker.role == "worker" and worker.master_host == "algo-2"
    outside = plan(hetero("algo-1", groups=DATA_FIRST))
    assert outside.role == "single" and outside.hosts == ("algo-1",)
    assert "MPI runs on algo-2, algo-3, master algo-2" in outside.role_reason


def test_hetero_without_distribution_groups_each_group_runs_its_own_job():
    # As the toolkit with MPI enabled: the distribution group defaults to the current host's own group.
    p = plan(hetero("algo-3", distribution=None, hps={"sagemaker_mpi_enabled": "true"}))
    assert p.role == "master" and p.hosts == ("algo-3",) and p.backend == "mpi"
    assert any("sagemaker_distribution_instance_groups not set: MPI spans this host's instance group 'data' only"
               in n for n in p.notes)
    p = plan(hetero("algo-2", distribution=None))
    assert p.role == "worker" and p.master_host == "algo-1" and p.hosts == ("algo-1", "algo-2")


def test_hetero_mpi_disabled_runs_each_distribution_host_alone():
    p = plan(hetero("algo-2", hps={"sagemaker_mpi_enabled": "false"}))
    assert p.role == "single" and p.hosts == ("algo-2",) and p.role_reason == ""
    assert any("each of the 2 hosts" in n for n in p.notes)


def test_hetero_rcnn_horovod_false_counts_the_distribution_hosts():
    cfg = hetero("algo-3", groups=(("train", ("algo-1", "algo-2")), ("solo", ("algo-3",))), distribution=("solo",),
                 hps={"sagemaker_program": "mask_rcnn", "horovod": "false"})
    p = plan(cfg, facts=GPU8)
    assert p.role == "single" and p.processes_per_host == 1

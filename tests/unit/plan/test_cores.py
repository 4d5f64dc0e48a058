"""plan/cores.py: a host's cores split between its processes and the hosts sharing its machine (SDK local mode's
instance type tells), with the reason the start log gives; the arithmetic any backend calls."""

import itertools

import pytest
from sagemaker_mxnet_horovod.plan.cores import CoreShare, core_share, hosts_sharing_machine
from unit_helpers.rule_cases import CPU2, CPU16, job


@pytest.mark.parametrize("cores,per_host,sharing", list(itertools.product((1, 2, 3, 8, 16, 96), (1, 2, 3, 8),
                                                                              (1, 2, 3, 4))))
def test_cores_per_process_is_the_floor_of_the_cores_over_every_process_on_the_machine_and_never_0(cores, per_host,
                                                                                                  sharing):
    share = CoreShare(cores, per_host, sharing)
    # The most threads per process that every process on the machine can have without passing its cores; 1 when
    # even one each passes them.
    fitting = [threads for threads in range(1, cores + 1) if threads * per_host * sharing <= cores]
    assert share.per_process == (fitting[-1] if fitting else 1)
    assert share.per_process * per_host * sharing <= cores or share.per_process == 1  # never more threads than cores
    assert share.per_process <= CoreShare(cores, per_host).per_process  # sharing never gives a process more


@pytest.mark.parametrize("share,per_process,why", [
    (CoreShare(2, 1), 2, "2 cores / 1 ranks per host"),
    (CoreShare(2, 1, 2), 1, "2 cores / (1 ranks per host x 2 hosts on this machine)"),  # make demo
    (CoreShare(2, 2, 2), 1, "2 cores / (2 ranks per host x 2 hosts on this machine)"),
    (CoreShare(16, 2, 3), 2, "16 cores / (2 ranks per host x 3 hosts on this machine)"),
    (CoreShare(96, 8, 1), 12, "96 cores / 8 ranks per host"),  # ml.p3dn / p4d.24xlarge
    (CoreShare(16, 4, 2, "workers"), 2, "16 cores / (4 workers per host x 2 hosts on this machine)"),
])
def test_the_reason_says_the_count(share, per_process, why):
    assert (share.per_process, share.why) == (per_process, why)


@pytest.mark.parametrize("instance_type", ["local", "local_gpu", "local_cpu"])  # SDK v2 Estimator, v3 ModelTrainer
@pytest.mark.parametrize("hosts", [("algo-1",), ("algo-1", "algo-2"), ("algo-1", "algo-2", "algo-3")])
def test_in_sdk_local_mode_every_host_of_the_job_shares_this_machine(instance_type, hosts):
    assert hosts_sharing_machine(job(hosts=hosts, instance_type=instance_type).config.resource) == len(hosts)


@pytest.mark.parametrize("instance_type", [None, "", "ml.c5.xlarge", "ml.p4d.24xlarge", "ml.local", "Local"])
def test_anywhere_else_a_host_is_alone_on_its_instance(instance_type):
    resource = job(hosts=("algo-1", "algo-2", "algo-3"), instance_type=instance_type).config.resource
    assert hosts_sharing_machine(resource) == 1


def test_core_share_reads_the_host_and_the_job():
    local = job(hosts=("algo-1", "algo-2"), instance_type="local")
    assert core_share(CPU2, local.config.resource, 1) == CoreShare(2, 1, 2, "ranks")
    assert core_share(CPU16, local.config.resource, 3, "servers") == CoreShare(16, 3, 2, "servers")
    alone = job(hosts=("algo-1", "algo-2"), instance_type="ml.c5.4xlarge")
    assert core_share(CPU16, alone.config.resource, 2).per_process == 8

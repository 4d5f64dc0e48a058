"""rendezvous.py: the master's table of ranks is each rank's own (gloo_ranks.py); the rendezvous admits the job's
hosts only, and says once of each stranger that it ignored it; Horovod's runner is imported only when the
rendezvous starts, never to plan. The server itself, a port already taken and the master's run
around it, with the image's Horovod: tests/image/test_gloo_rendezvous.py."""

import sys

import pytest
from sagemaker_mxnet_horovod.backends.mpi.rendezvous import JobHosts, Rendezvous, rank_table
from sagemaker_mxnet_horovod.backends.registry import plan_job
from unit_helpers.rule_cases import CPU2, two_hosts


def test_the_table_is_every_ranks_own_variables_in_rank_order():
    table = rank_table(4, 2)
    assert [(t["HOROVOD_RANK"], t["HOROVOD_LOCAL_RANK"], t["HOROVOD_CROSS_RANK"], t["HOROVOD_HOSTNAME"])
            for t in table] == [("0", "0", "0", "host-0"), ("1", "1", "0", "host-0"), ("2", "0", "1", "host-1"),
                                ("3", "1", "1", "host-1")]
    assert {(t["HOROVOD_SIZE"], t["HOROVOD_LOCAL_SIZE"], t["HOROVOD_CROSS_SIZE"]) for t in table} == {("4", "2", "2")}


def test_planning_a_gloo_job_needs_no_horovod_and_the_rendezvous_does(monkeypatch):
    monkeypatch.setitem(sys.modules, "horovod", None)  # import horovod... raises ImportError
    planned = plan_job(two_hosts().config, CPU2, {"HOROVOD_CONTROLLER": "gloo"})
    assert planned.env["HOROVOD_CPU_OPERATIONS"] == "gloo"
    with pytest.raises(ImportError):
        Rendezvous("127.0.0.1", 0, 2, 1, ())


def test_the_rendezvous_admits_the_jobs_hosts_and_loopback_and_logs_each_stranger_once():
    logged = []
    hosts = JobHosts({"172.18.0.2", "172.18.0.3"}, logged.append)
    assert hosts.admits("172.18.0.2") and hosts.admits("172.18.0.3") and hosts.admits("127.0.0.1")
    assert not hosts.admits("172.18.0.9") and not hosts.admits("172.18.0.9") and not hosts.admits("10.0.0.1")
    assert logged == [
        "ignored a connection to Horovod's Gloo rendezvous from 172.18.0.9: not a host of this job "
        "(127.0.0.1, 172.18.0.2, 172.18.0.3)",
        "ignored a connection to Horovod's Gloo rendezvous from 10.0.0.1: not a host of this job "
        "(127.0.0.1, 172.18.0.2, 172.18.0.3)"]

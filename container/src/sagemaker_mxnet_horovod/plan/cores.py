"""How many cores each process of a job gets on this machine: the thread rule's arithmetic, for any backend.

A host's cores (HostFacts.cpu_count: its CPU affinity and cgroup quota) are its own on SageMaker, one instance per
host. In SDK local mode every host of the job is a container on the same machine, each seeing the same cores, so
counting a host as if it were alone gives every rank all of them: 2 hosts x 1 rank on 2 cores ran 4 OpenMP threads
on 2 cores, and libgomp's spinning waits made MNIST's first epoch 4.5x to 17x a steady one
(docs/benchmarks/first-epoch.md, "Threads when hosts share a machine"). The cores are split between the ranks of every host on the machine instead.

Which hosts share this machine: SDK local mode writes the estimator's instance type into resourceconfig.json's
current_instance_type, "local" or "local_gpu" (v2's Estimator), "local_cpu" or "local_gpu" as v3's ModelTrainer
examples and this repository's SDK tests use: then all of the job's hosts. Anywhere else a host is taken to be alone
(SageMaker's own types all start "ml."). Hosts started on one
machine some other way (a plain `docker run` of each) are not detected yet: comparing the hosts' boot ids over the
cluster protocol would tell (docs/benchmarks/first-epoch.md); until then such a job sets OMP_NUM_THREADS itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.resource_config import ResourceConfig

# The SageMaker Python SDK tells local mode by this prefix of the instance type (sagemaker.image_uris and
# sagemaker.utils: instance_type.startswith("local")), and writes the type into each container's resourceconfig.json.
LOCAL_MODE_PREFIX = "local"


@dataclass(frozen=True)
class CoreShare:
    """A host's cores split between its processes and the hosts that share the machine with it."""

    cores: int  # this host's
    processes_per_host: int
    hosts_sharing: int = 1  # the hosts on this machine, this one included
    processes: str = "ranks"  # what the processes are, for the reason

    @property
    def per_process(self) -> int:
        """Whole cores per process, never 0: an oversubscribed machine still gives each process one thread."""
        return max(1, self.cores // (self.processes_per_host * self.hosts_sharing))

    @property
    def why(self) -> str:
        if self.hosts_sharing == 1:
            return f"{self.cores} cores / {self.processes_per_host} {self.processes} per host"
        return (f"{self.cores} cores / ({self.processes_per_host} {self.processes} per host x {self.hosts_sharing} "
                "hosts on this machine)")


def hosts_sharing_machine(resource: ResourceConfig) -> int:
    """How many of the job's hosts run on this machine, this one included."""
    local_mode = (resource.current_instance_type or "").startswith(LOCAL_MODE_PREFIX)
    return len(resource.hosts) if local_mode else 1


def core_share(facts: HostFacts, resource: ResourceConfig, processes_per_host: int,
               processes: str = "ranks") -> CoreShare:
    """This host's cores per process when it runs `processes_per_host` processes (a backend's ranks, servers...)."""
    return CoreShare(facts.cpu_count, processes_per_host, hosts_sharing_machine(resource), processes)

"""The parameter-server backend's plan: where the job's roles run. Every host starts its own processes, no mpirun
and no ssh: the scheduler on the job's first host, this host's servers, and its workers, which run the program
through rank_program as every rank does. They are the plan's data (`local_processes`: each one's name, role, command
and role variables); the DMLC_* variables they share are the backend's rules, each with its reason. ps_run.py runs
them and the cluster coordinates the hosts.
"""

from __future__ import annotations

import shlex

from sagemaker_mxnet_horovod.core.plan import LocalProcess
from sagemaker_mxnet_horovod.parse.settings import KEYS
from sagemaker_mxnet_horovod.plan.backend import HostInputs, HostPlan
from sagemaker_mxnet_horovod.plan.cores import core_share
from sagemaker_mxnet_horovod.plan.env_rules import PlanInputs, Rule, Setting
from sagemaker_mxnet_horovod.plan.job_plan import console
from sagemaker_mxnet_horovod.plan.layout import Layout

# Importing mxnet with DMLC_ROLE=server or scheduler runs that role (mxnet/kvstore_server.py) until the workers
# finish, then exits: what AWS's toolkit starts. From the code directory, whose modules a server can then unpickle
# (a custom optimizer the workers send it with update_on_kvstore).
ROLE_PROGRAM = ("-c", "import mxnet")
# The worker's place in the launcher's plan, for programs that need it before MXNet's kvstore gives them a rank
# (ps-lite's own ranks follow the order in which the nodes reached the scheduler): rank, local rank, local size.
WORKER_RANK, LOCAL_WORKER_RANK, LOCAL_WORKERS = "SMMH_WORKER_RANK", "SMMH_LOCAL_WORKER_RANK", "SMMH_LOCAL_WORKERS"


def server_count(layout: Layout, requested: int | None) -> int:
    """sagemaker_parameter_server_num_servers, else one per host (AWS's toolkit)."""
    return requested or len(layout.hosts)


def server_hosts(hosts: tuple[str, ...], servers: int) -> tuple[str, ...]:
    """The host of each server, in turn from the first host: 1 server runs beside the scheduler, 2 per host
    alternate over the hosts."""
    return tuple(hosts[index % len(hosts)] for index in range(servers))


def local_processes(layout: Layout, servers: int, python: str, rank_argv: tuple[str, ...],
                    code_dir: str) -> tuple[LocalProcess, ...]:
    """This host's processes, in the order they start: the scheduler (first host only), its servers, its workers
    (numbered host by host, as MPI numbers ranks)."""
    host, per_host = layout.current_host, layout.processes_per_host
    role_argv = (python, *ROLE_PROGRAM)
    processes = []
    if host == layout.master_host:
        processes.append(LocalProcess("scheduler", "scheduler", role_argv, {"DMLC_ROLE": "scheduler"}, code_dir))
    processes += [LocalProcess(f"server {index}", "server", role_argv, {"DMLC_ROLE": "server"}, code_dir)
                  for index, server_host in enumerate(server_hosts(layout.hosts, servers)) if server_host == host]
    first = layout.hosts.index(host) * per_host
    processes += [LocalProcess(f"worker {first + local}", "worker", rank_argv,
                               {"DMLC_ROLE": "worker", WORKER_RANK: str(first + local),
                                LOCAL_WORKER_RANK: str(local), LOCAL_WORKERS: str(per_host)}, code_dir)
                  for local in range(per_host)]
    return tuple(processes)


def describe_roles(layout: Layout, servers: int) -> str:
    """The job's roles in one line, for the start log: where the scheduler and the servers run."""
    placed = server_hosts(layout.hosts, servers)
    where = ", ".join(f"{host}: {placed.count(host)}" for host in layout.hosts if host in placed)
    workers = layout.processes_per_host * len(layout.hosts)
    return (f"parameter server: scheduler on {layout.master_host}; {servers} server{'s' if servers != 1 else ''} "
            f"({where}); {workers} worker{'s' if workers != 1 else ''} ({layout.processes_per_host} per host)")


def host_plan(inputs: HostInputs) -> HostPlan:
    """This host's own processes, and the start log's lines about them: where the job's roles run, each process
    of this host (its role's variables and its command), where their logs go."""
    job = inputs.job
    layout, settings = job.layout, job.config.settings
    servers = server_count(layout, settings.parameter_server_num_servers)
    processes = local_processes(layout, servers, inputs.python, inputs.rank_argv, str(job.config.paths.code_dir))
    lines = [describe_roles(layout, servers)]
    for process in processes:
        variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in process.env.items())
        lines.append(f"process {process.name}: {variables} {shlex.join(process.argv)}")
    lines.append(f"process logs: {job.config.paths.output_data_dir}/logs/<host>-rank-<worker>.log (a server's, the "
                 f"scheduler's: <host>-server-<n>.log, <host>-scheduler.log); console: {console(settings.console_ranks)}")
    return HostPlan(processes=processes, lines=tuple(lines))


# ---------------------------------------------------------------------------------------------------------
# Environment rules of parameter-server jobs (after env_rules.RULES in the start log). The layout's variables
# are the launcher's to decide: the container's environment does not override them (user_wins=False).

def scheduler_address(job: PlanInputs) -> list[Setting]:
    settings = job.config.settings
    return [
        Setting("DMLC_PS_ROOT_URI", job.layout.master_host, "the scheduler's host, the job's first, by name: "
                "every host resolved it to check in before its processes start", user_wins=False),
        Setting("DMLC_PS_ROOT_PORT", str(settings.parameter_server_port),
                f"the scheduler's port: {KEYS.parameter_server_port}, AWS's default 8000", user_wins=False),
        # ps-lite binds the scheduler to DMLC_PS_ROOT_URI, and ZeroMQ binds addresses, not host names: this
        # flag binds it to every address of its host instead.
        Setting("DMLC_USE_KUBERNETES", "1", "the scheduler listens on all of its host's addresses: ZeroMQ cannot "
                "bind a host name", user_wins=False),
    ]


def role_counts(job: PlanInputs) -> list[Setting]:
    layout, settings = job.layout, job.config.settings
    servers = server_count(layout, settings.parameter_server_num_servers)
    workers = layout.processes_per_host * len(layout.hosts)
    why_servers = (KEYS.parameter_server_num_servers if settings.parameter_server_num_servers
                   else "one per host, as AWS's MXNet toolkit")
    return [Setting("DMLC_NUM_SERVER", str(servers), why_servers, user_wins=False),
            Setting("DMLC_NUM_WORKER", str(workers), f"{layout.processes_per_host} per host x {len(layout.hosts)} "
                    "host(s)", user_wins=False)]


def node_interface(job: PlanInputs) -> list[Setting]:
    if not job.layout.interface:
        return []
    return [Setting("DMLC_INTERFACE", job.layout.interface, "servers and workers announce the cluster interface's "
                    "address, not the first one ps-lite finds")]


def ps_verbose(job: PlanInputs) -> list[Setting]:
    level = job.config.settings.parameter_server_verbose
    if level is None:
        return []
    return [Setting("PS_VERBOSE", str(level), f"{KEYS.parameter_server_verbose}: ps-lite's connection log",
                    user_wins=False)]


def omp_threads_per_worker(job: PlanInputs) -> list[Setting]:
    """The workers split their host's cores, and the cores of the machine when hosts share one (plan/cores.py); a
    worker alone on its host keeps MXNet's own choice, as under AWS's toolkit."""
    share = core_share(job.facts, job.config.resource, job.layout.processes_per_host, processes="workers")
    if share.processes_per_host < 2 and share.hosts_sharing < 2:
        return []
    return [Setting("OMP_NUM_THREADS", str(share.per_process), share.why)]


RULES: tuple[Rule, ...] = (
    scheduler_address,
    role_counts,
    node_interface,
    ps_verbose,
    omp_threads_per_worker,
)

"""The SM_* environment of a rank, as the sagemaker-training toolkit defines it.

Scripts written for AWS's images read these variables (SM_HPS, SM_CHANNEL_TRAIN, SM_TRAINING_ENV, ...), so
every one the toolkit sets (its `Environment().to_env_vars()`) is set here with the toolkit's value and
formatting; tests/toolkit compares the two inside the image. Deliberate differences (docs/compatibility.md):

- each host's ranks see that host's values (SM_CURRENT_HOST, is_master): under the toolkit, mpirun copies
  the master's environment to every rank;
- SM_NUM_CPUS counts the CPUs this container may use (affinity, cgroup quota), not the machine's;
- SM_NETWORK_INTERFACE_NAME is the interface the job uses: the resource config's if it exists, else the
  default route's (SDK v3 local mode names "ethwe", which does not exist there);
- the launcher's own keys (horovod_*, mpi_*) are not the program's hyperparameters;
- the launcher's own switches (sagemaker_mpi_enabled, sagemaker_parameter_server_enabled,
  sagemaker_distribution_instance_groups) are read as the launcher parsed them, the values it acts on:
  "False" is false (the toolkit takes any non-empty string as true), and one set by an environment variable counts.

Pure: everything comes from the parsed config, the host facts and the container's environment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sagemaker_mxnet_horovod.parse.resource_config import HOMOGENEOUS_GROUP
from sagemaker_mxnet_horovod.parse.settings import KEYS, TOOLKIT_OWN_KEYS
from sagemaker_mxnet_horovod.parse.training_config import TrainingConfig

# The toolkit's other framework params that put the current instance group among the distributed ones when no
# sagemaker_distribution_instance_groups is given: other frameworks' distributions, which this image does not run.
OTHER_DISTRIBUTION_KEYS = (
    "sagemaker_distributed_dataparallel_enabled", "sagemaker_pytorch_ddp_enabled",
    "sagemaker_pytorch_xla_multi_worker_enabled", "sagemaker_multi_worker_mirrored_strategy_enabled",
    "sagemaker_torch_distributed_enabled",
)
LOG_LEVEL_INFO = 20


def format_value(value: Any) -> str:
    """How the toolkit writes a value into an environment variable (mapping.to_env_vars)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def distribution_instance_groups(config: TrainingConfig, current_group: str) -> Any:
    """The groups MPI spans, as the toolkit decides: sagemaker_distribution_instance_groups if given, else
    the current group when distribution is enabled, else none. The launcher's settings as it parsed them; the
    toolkit's truthiness only for the other frameworks' keys, which the launcher does not parse."""
    settings = config.settings
    if settings.distribution_instance_groups is not None:
        return list(settings.distribution_instance_groups)
    enabled = (bool(settings.mpi_enabled) or settings.parameter_server_enabled
               or any(config.hyperparameters.get(key) for key in OTHER_DISTRIBUTION_KEYS))
    return [current_group] if enabled else []


def training_environment(config: TrainingConfig, num_cpus: int, num_gpus: int, interface: str | None,
                         program_name: str, base_env: Mapping[str, str]) -> dict[str, Any]:
    """The toolkit's Environment as a dict (what SM_TRAINING_ENV holds), for this host."""
    paths, resource, hps = config.paths, config.resource, config.hyperparameters
    raw_resource = dict(config.raw_resource_config)
    raw_groups = [g for g in raw_resource.get("instance_groups") or () if isinstance(g, dict)]
    current_group = resource.current_group_name or HOMOGENEOUS_GROUP
    distribution_groups = distribution_instance_groups(config, current_group)
    if raw_groups:
        distribution_hosts = [host for g in raw_groups if g.get("instance_group_name") in distribution_groups
                              for host in g.get("hosts", [])]
    else:
        distribution_hosts = list(resource.hosts)
    master = distribution_hosts[0] if distribution_hosts else resource.hosts[0]
    mp_parameters = base_env.get("SM_HP_MP_PARAMETERS")
    return {
        "additional_framework_parameters": {k: v for k, v in hps.items()
                                            if k.startswith("sagemaker_") and k not in TOOLKIT_OWN_KEYS},
        "channel_input_dirs": {c.name: str(paths.data_dir / c.name) for c in config.channels},
        "current_host": resource.current_host,
        "current_instance_group": current_group,
        "current_instance_group_hosts": next((g.get("hosts") for g in raw_groups
                                              if g.get("instance_group_name") == current_group), []),
        "current_instance_type": resource.current_instance_type or "local",
        "distribution_hosts": distribution_hosts,
        "distribution_instance_groups": distribution_groups,
        "framework_module": base_env.get("SAGEMAKER_TRAINING_MODULE"),
        "hosts": list(resource.hosts),
        "hyperparameters": {k: hps[k] for k in config.program_args},
        "input_config_dir": str(paths.config_dir),
        "input_data_config": dict(config.raw_input_data_config),
        "input_dir": str(paths.input_dir),
        "instance_groups": [g.get("instance_group_name") for g in raw_groups],
        "instance_groups_dict": {g.get("instance_group_name"): g for g in raw_groups},
        "is_hetero": len(raw_groups) > 1,
        "is_master": resource.current_host == master,
        "is_modelparallel_enabled": mp_parameters and mp_parameters != "{}",
        "is_smddpmprun_installed": False,  # SageMaker's data-parallel launchers are not in this image
        "is_smddprun_installed": False,
        "job_name": base_env.get("TRAINING_JOB_NAME"),
        "log_level": hps.get("sagemaker_container_log_level", LOG_LEVEL_INFO),
        "master_hostname": master,
        "model_dir": str(paths.model_dir),
        "module_dir": str(hps.get(KEYS.submit_directory, paths.code_dir)),
        "module_name": program_name[:-3] if program_name.endswith(".py") else program_name,
        "network_interface_name": interface,
        "num_cpus": num_cpus,
        "num_gpus": num_gpus,
        "num_neurons": 0,  # no Neuron devices on the instance types this image runs on
        "output_data_dir": str(paths.output_data_dir),
        "output_dir": str(paths.output_dir),
        "output_intermediate_dir": str(paths.output_intermediate_dir),
        "resource_config": raw_resource,
        "topology": raw_resource.get("topology", []),
        "user_entry_point": program_name,
    }


def sm_environment(config: TrainingConfig, num_cpus: int, num_gpus: int, interface: str | None,
                   program_name: str, base_env: Mapping[str, str]) -> dict[str, str]:
    """Every SM_* variable the toolkit sets (Environment.to_env_vars), plus SM_MASTER_ADDR and
    SM_CHECKPOINT_DIR, which it does not."""
    env = training_environment(config, num_cpus, num_gpus, interface, program_name, base_env)
    variables = {
        "hosts": env["hosts"],
        "network_interface_name": env["network_interface_name"],
        "hps": env["hyperparameters"],
        "user_entry_point": env["user_entry_point"],
        "framework_params": env["additional_framework_parameters"],
        "resource_config": env["resource_config"],
        "input_data_config": env["input_data_config"],
        "output_data_dir": env["output_data_dir"],
        "channels": sorted(env["channel_input_dirs"]),
        "current_host": env["current_host"],
        "current_instance_type": env["current_instance_type"],
        "current_instance_group": env["current_instance_group"],
        "current_instance_group_hosts": env["current_instance_group_hosts"],
        "instance_groups": env["instance_groups"],
        "instance_groups_dict": env["instance_groups_dict"],
        "distribution_instance_groups": env["distribution_instance_groups"],
        "is_hetero": env["is_hetero"],
        "module_name": env["module_name"],
        "log_level": env["log_level"],
        "framework_module": env["framework_module"],
        "input_dir": env["input_dir"],
        "input_config_dir": env["input_config_dir"],
        "output_dir": env["output_dir"],
        "num_cpus": env["num_cpus"],
        "num_gpus": env["num_gpus"],
        "num_neurons": env["num_neurons"],
        "model_dir": env["model_dir"],
        "module_dir": env["module_dir"],
        "training_env": env,
        "user_args": config.program_argv,
        "output_intermediate_dir": env["output_intermediate_dir"],
        # Not the toolkit's: the master's name for ranks that rendezvous themselves, and the checkpoint dir.
        "master_addr": env["master_hostname"],
        "checkpoint_dir": str(config.paths.checkpoint_dir),
    }
    if env["topology"]:
        variables["topology"] = env["topology"]
    for name, path in env["channel_input_dirs"].items():
        variables[f"channel_{name}"] = path
    for key, value in env["hyperparameters"].items():
        variables[f"hp_{key}"] = value
    return {f"SM_{key.upper()}": format_value(value) for key, value in variables.items()}


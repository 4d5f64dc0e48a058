"""The job's configuration, parsed once: SageMaker's three config files (with SM_* overrides), the launcher's
settings and the built-in program's launch rules, as one frozen TrainingConfig. The Debugger and Profiler
configurations the job carries are kept as read (cli.py reads them with compat/debugger.py, the planner notes what
this image does with them).

parse_training_config is pure but for loading a built-in program's launch module; load_training_config reads
the files. Errors are ConfigError with a message that names the file, key and value at fault.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.input_config import Channel, parse_input_data_config
from sagemaker_mxnet_horovod.parse.launch_rules import (
    DEFAULT_ENTRYPOINTS_DIR,
    LaunchRules,
    ParameterServerRequest,
    SingleProcessRequest,
    load_launch_rules,
    parameter_server_request,
    single_process_request,
)
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.resource_config import (
    ResourceConfig,
    parse_resource_config,
    resolve_distribution_hosts,
)
from sagemaker_mxnet_horovod.parse.settings import (
    LAUNCHER_PREFIXES,
    SAGEMAKER_KEY_NAMES,
    LauncherSettings,
    parse_launcher_settings,
)
from sagemaker_mxnet_horovod.parse.values import (
    command_line_arguments,
    decode_hyperparameter,
    format_argument,
    load_json,
)

BUILTIN_PROGRAMS = ("mnist", "faster_rcnn", "mask_rcnn")


@dataclass(frozen=True)
class TrainingConfig:
    paths: Paths
    resource: ResourceConfig
    hyperparameters: Mapping[str, Any]  # every key, decoded (what SM_HPS shows)
    program_args: Mapping[str, str]  # the keys the program receives as --key value
    settings: LauncherSettings
    channels: tuple[Channel, ...]
    warnings: tuple[str, ...] = field(default=())
    # As read (after overrides), for the SM_RESOURCE_CONFIG / SM_INPUT_DATA_CONFIG the program sees.
    raw_resource_config: Mapping[str, Any] = field(default_factory=dict)
    raw_input_data_config: Mapping[str, Any] = field(default_factory=dict)
    launch: LaunchRules = field(default_factory=LaunchRules)  # the built-in program's; none for a user's
    single_process: SingleProcessRequest | None = None  # a launch rule the arguments switch on
    parameter_server: ParameterServerRequest | None = None  # the program's argument that decides its kvstore
    # The job's Debugger and Profiler configuration files, by name, as read (compat/debugger.read_configs).
    debugger_configs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def program_argv(self) -> list[str]:
        """The program's arguments, as the toolkit builds them (keys sorted, --key value)."""
        return command_line_arguments(self.program_args)

    @property
    def builtin_program(self) -> str | None:
        """The built-in program's name, or None for a user script."""
        return self.settings.program if self.settings.submit_directory is None else None


def parse_hyperparameters(data: Any, env: Mapping[str, str], source: str = "hyperparameters.json") -> dict:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a JSON object")
    hps = {str(k): decode_hyperparameter(v) for k, v in data.items()}
    if "SM_HPS" in env:
        try:
            override = json.loads(env["SM_HPS"])
        except ValueError:
            raise ConfigError(f"SM_HPS is not valid JSON: {env['SM_HPS']!r}") from None
        if not isinstance(override, dict):
            raise ConfigError("SM_HPS must be a JSON object")
        hps.update({str(k): decode_hyperparameter(v) for k, v in override.items()})
    return hps


def is_program_hyperparameter(key: str) -> bool:
    """Whether a hyperparameter reaches the program (SM_HPS, its arguments) rather than the launcher."""
    return not key.startswith(LAUNCHER_PREFIXES) and key not in SAGEMAKER_KEY_NAMES


def load_training_config(env: Mapping[str, str] | None = None, entrypoints_dir: str = DEFAULT_ENTRYPOINTS_DIR,
                         debugger_configs: Mapping[str, Any] | None = None) -> TrainingConfig:
    """Read /opt/ml/input/config/*.json (root from SAGEMAKER_BASE_DIR) with SM_* overrides."""
    env = os.environ if env is None else env
    paths = Paths(Path(env.get("SAGEMAKER_BASE_DIR", "/opt/ml")))
    config_dir = paths.config_dir
    return parse_training_config(
        paths,
        resource_data=load_json(config_dir / "resourceconfig.json", required=False),
        hyperparameter_data=load_json(config_dir / "hyperparameters.json", required=False),
        input_data=load_json(config_dir / "inputdataconfig.json", required=False),
        env=env,
        entrypoints_dir=entrypoints_dir,
        debugger_configs=debugger_configs,
    )


def parse_training_config(
    paths: Paths, resource_data: Any, hyperparameter_data: Any, input_data: Any, env: Mapping[str, str],
    entrypoints_dir: str = DEFAULT_ENTRYPOINTS_DIR, debugger_configs: Mapping[str, Any] | None = None,
) -> TrainingConfig:
    resource = parse_resource_config(resource_data, env)
    hps = parse_hyperparameters(hyperparameter_data, env)
    settings, warnings = parse_launcher_settings(hps, env)
    resource = replace(resource, distribution_hosts=resolve_distribution_hosts(
        resource, settings.distribution_instance_groups))
    channels = parse_input_data_config(input_data)
    program_args = {key: format_argument(hps[key]) for key in sorted(hps) if is_program_hyperparameter(key)}
    launch = load_launch_rules(settings.program if settings.submit_directory is None else None, entrypoints_dir)
    return TrainingConfig(
        paths=paths,
        resource=resource,
        hyperparameters=hps,
        program_args=program_args,
        settings=settings,
        channels=channels,
        warnings=tuple(warnings),
        debugger_configs=dict(debugger_configs or {}),
        raw_resource_config=resource_data if isinstance(resource_data, dict) else {},
        raw_input_data_config=input_data if isinstance(input_data, dict) else {},
        launch=launch,
        single_process=single_process_request(launch, program_args),
        parameter_server=parameter_server_request(launch, program_args),
    )

#!/usr/bin/env python3
"""SDK v2 local mode with the SDK's default Debugger settings, and the hook configuration delivered as SageMaker would.

examples/sdk_v2_estimator.py's Estimator, untouched: SDK v2 gives it a DebugHookConfig, but its local mode writes
only hyperparameters.json, resourceconfig.json and inputdataconfig.json into the containers (LocalSagemakerClient
drops DebugHookConfig and ProfilerConfig), so a local job never sees one. This script takes the DebugHookConfig the
SDK built for the job (the CreateTrainingJob request's), writes it as SageMaker writes debughookconfig.json, and
hands it to the containers as an input channel named by smdebug's own variable, SMDEBUG_CONFIG_FILE_PATH.

usage: (the SDK's python) local_debugger_job.py EXAMPLE-ARGS...   (those of examples/sdk_v2_estimator.py --local)
"""

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import sdk_v2_estimator as example  # noqa: E402
from sagemaker.estimator import _TrainingJob  # noqa: E402
from sagemaker.inputs import TrainingInput  # noqa: E402

args = example.parse_args(sys.argv[1:])
estimator = example.make_estimator(args)
estimator._prepare_for_training()
request = _TrainingJob._get_train_args(estimator, example.channels(args), experiment_config=None)
hook = {"LocalPath": "/opt/ml/output/tensors", **request["debugger_hook_config"]}
print(f"SDK DebugHookConfig: {json.dumps(request['debugger_hook_config'])}", flush=True)
config_dir = Path(tempfile.mkdtemp(prefix="debugger-config-"))
(config_dir / "debughookconfig.json").write_text(json.dumps(hook))
estimator.environment = {**(estimator.environment or {}),
                         "SMDEBUG_CONFIG_FILE_PATH": "/opt/ml/input/data/debugger/debughookconfig.json"}
estimator.fit({**example.channels(args), "debugger": TrainingInput(f"file://{config_dir}")}, wait=True, logs="All")
print(f"model artifacts: {estimator.model_data}")

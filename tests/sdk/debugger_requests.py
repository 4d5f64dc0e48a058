"""The DebugHookConfig and ProfilerConfig that SageMaker Python SDK v2 (the version of tests/sdk/requirements-v2.txt)
puts in CreateTrainingJob for a built-in-program Estimator, as the files SageMaker writes from them into
/opt/ml/input/config: the request's fields, plus the LocalPath SageMaker fills in when the request has none (its
documented defaults, /opt/ml/output/tensors and /opt/ml/output/profiler, which smdebug uses too).

Run with the SDK's Python: `python tests/sdk/debugger_requests.py OUT_DIR` writes one FILE.json per case;
tests/fixtures/debugger/ holds what it wrote, and tests/sdk/test_sdk_debugger.py checks they still agree.
"""

import json
import sys
from pathlib import Path

OUTPUT = "s3://bucket/job/output"


def cases():
    from sagemaker.debugger import (
        CollectionConfig,
        DebuggerHookConfig,
        FrameworkProfile,
        ProfilerConfig,
        Rule,
        rule_configs,
    )

    # name -> (Estimator options, the files of interest)
    return {
        # SDK v2's defaults: what every Estimator sends unless told otherwise.
        "sdk-v2-default": ({}, ("debughookconfig.json", "profilerconfig.json")),
        # Collections and save intervals as users pass them (smdebug's collection and parameter names).
        "sdk-v2-collections": ({"debugger_hook_config": DebuggerHookConfig(
            hook_parameters={"save_interval": "2", "include_workers": "all"},
            collection_configs=[CollectionConfig("weights"), CollectionConfig("gradients"),
                                CollectionConfig("losses", parameters={"save_interval": "1"})])},
            ("debughookconfig.json",)),
        # Built-in rules: the SDK adds the collections each rule reads.
        "sdk-v2-rules": ({"rules": [Rule.sagemaker(rule_configs.vanishing_gradient()),
                                    Rule.sagemaker(rule_configs.loss_not_decreasing())]}, ("debughookconfig.json",)),
        # Framework profiling on (FrameworkProfile's defaults) besides the system monitoring.
        "sdk-v2-framework-profile": ({"profiler_config": ProfilerConfig(
            framework_profile_params=FrameworkProfile(start_step=2, num_steps=3))}, ("profilerconfig.json",)),
    }


def request(options):
    from sagemaker.estimator import Estimator, _TrainingJob

    estimator = Estimator(image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/sagemaker-mxnet-horovod:cpu",
                          role="arn:aws:iam::123456789012:role/SageMakerRole", instance_count=2,
                          instance_type="ml.c5.xlarge", hyperparameters={"sagemaker_program": "mnist"},
                          output_path=OUTPUT, **options)
    estimator._prepare_for_training(job_name="debugger-job")
    return _TrainingJob._get_train_args(estimator, {"train": "s3://bucket/train"}, experiment_config=None)


def config_files(train_args):
    """The two files as SageMaker writes them from the request (LocalPath: SageMaker's default when absent)."""
    files = {}
    hook = train_args.get("debugger_hook_config")
    if hook:
        hook = {"LocalPath": "/opt/ml/output/tensors", **hook}
        if "CollectionConfigurations" in hook:  # the SDK builds them from a set: their order varies between runs
            hook["CollectionConfigurations"].sort(key=lambda collection: collection["CollectionName"])
        files["debughookconfig.json"] = hook
    profiler = train_args.get("profiler_config")
    if profiler and not profiler.get("DisableProfiler"):
        files["profilerconfig.json"] = profiler
    return files


def main(out_dir):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, (options, wanted) in cases().items():
        for file_name, content in config_files(request(options)).items():
            if file_name in wanted:
                (out / f"{name}.{file_name}").write_text(json.dumps(content, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

"""Local-mode jobs with a user's own script, as a user writes them with the real SDK (run by tests/sdk under
the SDK's venv, offline; see sdk_support.py). Prints "model artifacts: PATH" when the SDK returns.

  sdk_jobs.py v2-mxnet --image IMG --source-dir DIR --train DIR --output DIR [--distribution mpi|parameter_server]
  sdk_jobs.py v3-mpi   --image IMG --source-dir DIR --train DIR --output DIR
"""

from __future__ import annotations

import argparse
import json
import os

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"  # any ARN: local mode never assumes it
HYPERPARAMETERS = {"epochs": 1, "lr": 0.1}


def v2_mxnet(args) -> str:
    from sagemaker.local import LocalSession
    from sagemaker.mxnet import MXNet

    session = LocalSession()
    # local_code: the SDK mounts source_dir into every container instead of uploading it to S3.
    local = {**(session.config or {}).get("local", {}), "local_code": True}
    session.config = {**(session.config or {}), "local": local}
    if args.distribution == "mpi":
        distribution = {"mpi": {"enabled": True, "processes_per_host": args.processes_per_host,
                                "custom_mpi_options": args.custom_mpi_options}}
        entry_point = "train_hvd.py"
    else:
        distribution = {"parameter_server": {"enabled": True}}
        entry_point = "train_ps.py"
    estimator = MXNet(entry_point=entry_point, source_dir=args.source_dir, image_uri=args.image,
                      framework_version="1.9.0", py_version="py38", role=ROLE, instance_count=2,
                      instance_type="local", hyperparameters=HYPERPARAMETERS, distribution=distribution,
                      output_path=f"file://{os.path.abspath(args.output)}", sagemaker_session=session)
    if args.print_hyperparameters:  # what CreateTrainingJob would carry, without running the job
        estimator._prepare_for_training(job_name="hvd-user-script" if args.distribution == "mpi" else "ps-user-script")
        print(json.dumps(estimator.hyperparameters()))
        raise SystemExit(0)
    estimator.fit({"train": f"file://{os.path.abspath(args.train)}"})
    return estimator.model_data


def v3_mpi(args) -> str:
    from sagemaker.core.training.configs import Compute, InputData, SourceCode
    from sagemaker.train.distributed import MPI
    from sagemaker.train.model_trainer import Mode, ModelTrainer

    root = os.path.abspath(args.output)
    os.makedirs(root, exist_ok=True)
    trainer = ModelTrainer(
        training_image=args.image,
        source_code=SourceCode(source_dir=args.source_dir, entry_script="train_hvd.py"),
        distributed=MPI(process_count_per_node=args.processes_per_host,
                        mpi_additional_options=["-x", "USER_MARKER=from mpi_additional_options"]),
        compute=Compute(instance_type="local_cpu", instance_count=2),
        hyperparameters={**HYPERPARAMETERS, **dict(kv.split("=", 1) for kv in args.hyperparameter)},
        training_mode=Mode.LOCAL_CONTAINER,
        local_container_root=root,
        base_job_name="hvd-user-script",
    )
    trainer.train(input_data_config=[InputData(channel_name="train", data_source=os.path.abspath(args.train))],
                  wait=True)
    return os.path.join(root, "compressed_artifacts", "model.tar.gz")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("job", choices=["v2-mxnet", "v3-mpi"])
    parser.add_argument("--image", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--distribution", choices=["mpi", "parameter_server"], default="mpi")
    parser.add_argument("--processes-per-host", type=int, default=1)
    parser.add_argument("--custom-mpi-options", default="")
    parser.add_argument("--hyperparameter", action="append", default=[], metavar="KEY=VALUE",
                        help="v3-mpi: one more hyperparameter")
    parser.add_argument("--print-hyperparameters", action="store_true", help="v2-mxnet: print them and exit")
    args = parser.parse_args()
    artifacts = (v2_mxnet if args.job == "v2-mxnet" else v3_mpi)(args)
    print(f"model artifacts: {artifacts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

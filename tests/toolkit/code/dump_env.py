"""A user's script as the sagemaker-training toolkit runs it: reads a file next to itself (relative to the working
directory, as Horovod's MXNet MNIST example does) and records its SM_* environment, arguments and working
directory into SM_OUTPUT_DATA_DIR/rank-<rank>.json, with what the sagemaker-training toolkit computes from this
host's config files (its Environment().to_env_vars() and to_cmd_args()), for comparison."""

import json
import os
import sys

with open("data.txt") as f:  # relative: works only when the program starts in the code directory
    data = f.read().strip()
rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
record = {
    "argv": sys.argv[1:],
    "cwd": os.getcwd(),
    "data": data,
    "env": {k: v for k, v in os.environ.items() if k.startswith("SM_") or k in ("NCCL_DEBUG", "HOROVOD_TIMELINE")},
}
from sagemaker_training import environment  # noqa: E402 - after the environment is recorded: it changes it

toolkit = environment.Environment()
record["toolkit"] = {"env": toolkit.to_env_vars(), "args": toolkit.to_cmd_args()}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump(record, f)
print(f"rank {rank} on {os.environ['SM_CURRENT_HOST']}: {data}")

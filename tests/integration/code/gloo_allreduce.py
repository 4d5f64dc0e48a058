"""A user's script for Horovod's Gloo under the launcher's mpirun: Gloo, not MPI, runs Horovod, and an allreduce of
rank + 1 sums to size * (size + 1) / 2 on every rank. Each rank writes what it saw to the model directory (with
--report-env A,B: those variables as it got them)."""

import json
import os
import sys

import horovod.mxnet as hvd
import mxnet as mx

hvd.init()
rank, size = hvd.rank(), hvd.size()
assert hvd.gloo_enabled() and not hvd.mpi_enabled(), (hvd.gloo_enabled(), hvd.mpi_enabled())
total = hvd.allreduce(mx.nd.full((3,), rank + 1), average=False, name="sum").asnumpy().tolist()
record = {"rank": rank, "size": size, "local_rank": hvd.local_rank(), "local_size": hvd.local_size(),
          "cross_rank": hvd.cross_rank(), "sum": total, "host": os.environ.get("SM_CURRENT_HOST"),
          "iface": os.environ.get("HOROVOD_GLOO_IFACE")}
if "--report-env" in sys.argv[:-1]:
    record["env"] = {name: os.environ.get(name) for name in sys.argv[sys.argv.index("--report-env") + 1].split(",")}
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"gloo-rank-{rank}.json"), "w") as f:
    json.dump(record, f)
print(f"rank {rank}/{size} over Gloo: sum={total[0]}")

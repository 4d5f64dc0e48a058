"""A rank that crashes in native code, for the fault suite: after hvd.init() and a first allreduce, rank 1 reads
address 0 through ctypes; the others keep working in collectives, as training would while a peer dies.

MXNet's SIGSEGV handler reports the crash; with `--handler open-mpi`, SIGSEGV is left unhandled until
hvd.init(), where Open MPI installs its handler, which prints the stack; with `--handler mxnet-exit-hangs`,
MXNet's handler reports it and its exit() never returns."""

import ctypes
import os
import signal
import sys
import threading
import time

import horovod.mxnet as hvd
import mxnet as mx

handler = sys.argv[sys.argv.index("--handler") + 1] if "--handler" in sys.argv[:-1] else "mxnet"
if handler == "open-mpi":
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)  # MXNet's, installed when it was imported
hvd.init()
hvd.allreduce(mx.nd.ones((4,)), name="first").asnumpy()
print(f"rank {hvd.rank()}/{hvd.size()}: first allreduce done", flush=True)
if hvd.rank() == 1:
    # The moment of the fault, for the suite's "seconds from fault to exit".
    with open(os.path.join(os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"), "fault-at"), "w") as f:
        f.write(repr(time.time()))
    if handler == "mxnet-exit-hangs":
        # MXNet's handler calls exit() on the crashed thread; a library's exit handler that deadlocks there
        # leaves the rank running forever. This one, registered last, runs first and blocks, as such a one would
        # (the read of address 0 releases the GIL, so the handler can take it).
        HANG_AT_EXIT = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: threading.Event().wait())
        ctypes.CDLL(None).__cxa_atexit(HANG_AT_EXIT, None, None)
    ctypes.string_at(0)
for step in range(600):
    hvd.allreduce(mx.nd.ones((4,)), name=f"step{step}").asnumpy()
    time.sleep(0.1)

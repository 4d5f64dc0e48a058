"""How a process that is not one of mpirun's ranks failed (the single process, a parameter-server process), as one
Failure: its exit, its native crash (crashes.py) or its error line, its last stderr lines. mpirun's ranks:
backends/mpi/mpirun_report.py, which names a crash the same way (crashed)."""

from __future__ import annotations

from collections.abc import Sequence

from sagemaker_mxnet_horovod.core.failure import Failure, describe_exit, error_line
from sagemaker_mxnet_horovod.diagnose.crashes import NativeCrash


def crashed(crash: NativeCrash, how: str) -> str:
    """'crashed with SIGSEGV (...) in f (lib.so); then it exited with code 255': the crash report's signal
    is the cause; how the rank ended (mpirun's report) may be a later failure, such as an abort on exit."""
    if how == f"was killed by {crash.signal_name}":
        return f"was killed by {crash.describe()}"
    return f"crashed with {crash.describe()}; then it {how}"


def process_failure(program: str, host: str, returncode: int, stderr: Sequence[str],
                    crash: NativeCrash | None = None) -> Failure:
    """A program run without MPI: no ranks, just the process, its crash or error line, its last stderr lines."""
    if crash:
        head = f"{program} on {host} {crashed(crash, describe_exit(returncode))}"
    else:
        cause = error_line(stderr)
        head = f"{program} on {host} {describe_exit(returncode)}" + (f": {cause}" if cause else "")
    signal_number = crash.signal_number if crash else (-returncode if returncode < 0 else None)
    return Failure(head, host=host, signal_number=signal_number, tail_title=f"{program} stderr", tail=tuple(stderr))

"""mpirun_report.py: mpirun's output parsed into 'which rank, where, how', cause first; the rank with a cause of its own
named rather than the one that only noticed it; a native crash named by its signal and frame.

captures/ holds real output of ranks that crashed in native code:
- ci19-segv-then-abort.txt: CI's two-host Faster R-CNN failure (Horovod read a freed tensor name). Its stack
  and mpirun's message are verbatim; the CI log had cut what came before frame [0], written here as this
  image's MXNet and Open MPI print it (the lines of the captures below).
- plain-mpirun-segv-exit255.txt: the same crash under mpirun without --tag-output.
- ctypes-segv-mxnet-handler.txt: ctypes.string_at(0) on rank 1 after hvd.init() (MXNet's handler).
- ctypes-segv-open-mpi-handler.txt: the same with SIGSEGV reset to SIG_DFL before hvd.init() (Open MPI's).
- os-abort-open-mpi-handler.txt: os.abort() on rank 1.
The last three: `mpirun --tag-output -np 2` in this image. test_crashes.py reads them too, and
diagnose/test_process_failure.py the second, as a program's own output."""

import os
from pathlib import Path

from sagemaker_mxnet_horovod.act.supervise import JobProcess
from sagemaker_mxnet_horovod.backends.mpi.mpirun_report import MpirunReport, parse_mpirun_report, rank_failure
from sagemaker_mxnet_horovod.backends.mpi.output import MPIRUN
from sagemaker_mxnet_horovod.core.failure import fit
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog, NativeCrash

NONZERO = """--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[41731,1],3]
  Exit code:    2
--------------------------------------------------------------------------""".splitlines()

SIGNALED = """--------------------------------------------------------------------------
mpirun noticed that process rank 1 with PID 0 on node 8c1f2a exited on signal 11 (Segmentation fault).
--------------------------------------------------------------------------""".splitlines()

LOST = """--------------------------------------------------------------------------
ORTE has lost communication with a remote daemon.

  HNP daemon   : [[5467,0],0] on node 8c1f2a
  Remote daemon: [[5467,0],1] on node algo-2

This is usually due to either a failure of the TCP network
connection to the node, or possibly an internal failure of
the daemon itself. We cannot recover from this failure, and
therefore will terminate the job.
--------------------------------------------------------------------------""".splitlines()

HOSTS = ("algo-1", "algo-1", "algo-2", "algo-2")




def test_parse_nonzero_exit():
    assert parse_mpirun_report(NONZERO) == MpirunReport(rank=3, host=None, exit_code=2)


def test_parse_signal():
    assert parse_mpirun_report(SIGNALED) == MpirunReport(rank=1, host="8c1f2a", signal_number=11)


def test_parse_lost_daemon():
    assert parse_mpirun_report(LOST).lost_host == "algo-2"


def test_parse_nothing():
    assert parse_mpirun_report(["hello"]) is None


def test_message_names_rank_host_code_and_error_line_first():
    stderr = {3: ["Traceback (most recent call last):", '  File "x.py", line 1', "ValueError: labels out of range"]}
    message = rank_failure(2, parse_mpirun_report(NONZERO), HOSTS, stderr, NONZERO).render()
    first, *rest = message.splitlines()
    assert first == "rank 3 on algo-2 exited with code 2: ValueError: labels out of range"
    assert "Traceback (most recent call last):" in rest


SHUT_DOWN = ("mxnet.base.MXNetError: MXNetError: Horovod has been shut down. This was caused by an exception on "
             "one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks "
             "finished execution.")
FIRST_EXIT_RANK_0 = [line.replace("[[41731,1],3]", "[[41731,1],0]").replace("Exit code:    2", "Exit code:    1")
                     for line in NONZERO]


def test_message_names_the_rank_that_failed_not_the_one_that_noticed():
    # Rank 0 reads Horovod's shutdown before rank 1's own exit reaches mpirun: rank 1 is the cause.
    stderr = {0: ["Traceback (most recent call last):", SHUT_DOWN],
              2: ["Traceback (most recent call last):", "ValueError: rank 2 was asked to fail"]}
    message = rank_failure(1, parse_mpirun_report(FIRST_EXIT_RANK_0), HOSTS, stderr, FIRST_EXIT_RANK_0).render()
    first, *rest = message.splitlines()
    assert first.startswith("rank 2 on algo-2 failed: ValueError: rank 2 was asked to fail "
                            "(then rank 0 on algo-1 exited with code 1: mxnet.base.MXNetError: MXNetError: Horovod")
    assert len(first) < 250
    assert rest[0] == "--- last lines of rank 2 stderr ---"


def test_message_keeps_the_reported_rank_when_no_other_has_a_cause():
    stderr = {0: [SHUT_DOWN], 1: ["", "  "], 2: ["--------------------------------------------------------------",
                                                  "An MPI communication peer process has unexpectedly disconnected."]}
    message = rank_failure(1, parse_mpirun_report(FIRST_EXIT_RANK_0), HOSTS, stderr, FIRST_EXIT_RANK_0).render()
    assert message.startswith("rank 0 on algo-1 exited with code 1: mxnet.base.MXNetError: MXNetError: Horovod has")


def test_message_uses_config_host_names_not_mpirun_node_names():
    message = rank_failure(139, parse_mpirun_report(SIGNALED), HOSTS, {}, SIGNALED).render()
    assert message.startswith("rank 1 on algo-1 was killed by SIGSEGV")


CAPTURES = Path(__file__).parents[2] / "diagnose" / "captures"
TWO_HOSTS = ("algo-1", "algo-2")


def replay(capture: str):
    """The launcher's view of a captured output: supervise.JobProcess reads it (from cat) as it reads mpirun's, with
    the MPI backend's reader, with the launcher's CrashLog observing the ranks' stderr."""
    crash_log = CrashLog()
    job = JobProcess(["sh", "-c", 'cat "$0" >&2', str(CAPTURES / capture)], dict(os.environ), output=MPIRUN,
                     stderr_observers=(crash_log.observe,))
    job.start()
    return job.wait(), crash_log


def crash_message(capture: str, returncode: int) -> tuple[str, str]:
    """(the message with the crash log, the message the launcher wrote before it had one)"""
    result, crash_log = replay(capture)
    args = (returncode, parse_mpirun_report(result.untagged_tail), TWO_HOSTS, result.rank_stderr,
            result.untagged_tail)
    return rank_failure(*args, crash_log.crashes()).render(), rank_failure(*args).render()


def test_segv_then_abort_names_the_segv_and_its_frame_then_the_abort():
    message, before = crash_message("ci19-segv-then-abort.txt", 134)
    assert before.startswith("rank 1 on algo-2 was killed by SIGABRT: [71725b39eb26:00018] *** End of error message")
    first, *rest = fit(message).splitlines()
    assert first == ("rank 1 on algo-2 crashed with SIGSEGV (segmentation fault) in "
                     "horovod::common::EnqueueTensorBroadcast (mpi_lib.cpython-311-x86_64-linux-gnu.so); "
                     "then it was killed by SIGABRT")
    # The stack's tail follows, without the tags mpirun left in the middle of lines.
    assert rest[-1] == "[71725b39eb26:00018] *** End of error message ***"
    assert "<stderr>:" not in message and "--- last lines of rank 1 stderr ---" in message


def test_mxnet_handler_exit_names_the_segv_then_the_exit_code():
    message, before = crash_message("ctypes-segv-mxnet-handler.txt", 255)
    assert before.startswith("rank 1 on algo-2 exited with code 255: Segmentation fault: 11")
    assert message.splitlines()[0] == ("rank 1 on algo-2 crashed with SIGSEGV (segmentation fault); "
                                       "then it exited with code 255")


def test_open_mpi_handler_names_the_signal_once_and_the_frame():
    message, before = crash_message("ctypes-segv-open-mpi-handler.txt", 139)
    assert before.startswith("rank 1 on algo-2 was killed by SIGSEGV: [7729ac29c9ae:00012] *** End of error")
    assert message.splitlines()[0] == ("rank 1 on algo-2 was killed by SIGSEGV (segmentation fault) in ffi_call "
                                       "(libffi.so.8)")
    message, _ = crash_message("os-abort-open-mpi-handler.txt", 134)
    assert message.splitlines()[0] == "rank 1 on algo-2 was killed by SIGABRT (aborted)"


def test_a_crashed_rank_is_the_cause_when_mpirun_names_one_that_noticed():
    stderr = {0: ["Traceback (most recent call last):", SHUT_DOWN], 1: ["", "Segmentation fault: 11", ""]}
    message = rank_failure(1, parse_mpirun_report(FIRST_EXIT_RANK_0), TWO_HOSTS, stderr, FIRST_EXIT_RANK_0,
                                   {1: NativeCrash(11)}).render()
    first, *rest = message.splitlines()
    assert first.startswith("rank 1 on algo-2 crashed with SIGSEGV (segmentation fault) (then rank 0 on algo-1 "
                            "exited with code 1: mxnet.base.MXNetError: MXNetError: Horovod")
    assert rest[0] == "--- last lines of rank 1 stderr ---"
    message = rank_failure(255, None, TWO_HOSTS, stderr, [], {1: NativeCrash(11)}).render()
    assert message.startswith("mpirun exited with code 255; rank 1 on algo-2 crashed with SIGSEGV (segmentation")


def test_a_rank_that_aborts_after_horovods_shutdown_names_the_rank_that_raised():
    # CI's integration run: rank 1 raised; rank 0 read Horovod's shutdown, then aborted on its way out (its crash
    # report last in its stderr), and mpirun named rank 0's SIGABRT first.
    aborted = [line.replace("signal 11 (Segmentation fault)", "signal 6 (Aborted)").replace("rank 1", "rank 0")
               for line in SIGNALED]
    stderr = {0: ["Traceback (most recent call last):", SHUT_DOWN, "[42de643d9da7:00022] [16] ...",
                  "[42de643d9da7:00022] *** End of error message ***"],
              1: ["Traceback (most recent call last):", "RuntimeError: rank 1 on algo-2: bad labels"]}
    report = parse_mpirun_report(aborted)
    assert (report.rank, report.signal_number) == (0, 6)
    message = rank_failure(134, report, TWO_HOSTS, stderr, aborted, {0: NativeCrash(6)}).render()
    assert message.startswith("rank 1 on algo-2 failed: RuntimeError: rank 1 on algo-2: bad labels (then rank 0 on "
                              "algo-1 was killed by SIGABRT: mxnet.base.MXNetError: MXNetError: Horovod")
    # Aborting is a cause of its own without Horovod's shutdown before it, and a crash other than an abort always.
    alone = {0: stderr[0][:1] + stderr[0][2:], 1: stderr[1]}
    message = rank_failure(134, report, TWO_HOSTS, alone, aborted, {0: NativeCrash(6)}).render()
    assert message.startswith("rank 0 on algo-1 was killed by SIGABRT (aborted)")
    message = rank_failure(134, report, TWO_HOSTS, stderr, aborted, {0: NativeCrash(11)}).render()
    assert message.startswith("rank 0 on algo-1 crashed with SIGSEGV (segmentation fault); then it was killed by")


def test_a_python_traceback_reads_as_before_with_the_crash_log_watching():
    stderr = {3: ["Traceback (most recent call last):", '  File "x.py", line 1', "ValueError: labels out of range"]}
    crash_log = CrashLog()
    for line in stderr[3]:
        crash_log.observe(3, line)
    assert crash_log.crashes() == {}
    args = (2, parse_mpirun_report(NONZERO), HOSTS, stderr, NONZERO)
    assert rank_failure(*args, crash_log.crashes()).render() == rank_failure(*args).render()
    assert rank_failure(*args).render().startswith("rank 3 on algo-2 exited with code 2: ValueError: labels out")


def test_message_for_lost_host():
    message = rank_failure(1, parse_mpirun_report(LOST), HOSTS, {}, LOST).render()
    assert message.startswith("lost contact with host algo-2: its MPI daemon died")


def test_message_without_named_rank_uses_first_rank_with_stderr_then_mpirun():
    message = rank_failure(1, None, HOSTS, {2: ["", "RuntimeError: boom"]}, []).render()
    assert message.startswith("mpirun exited with code 1; rank 2 on algo-2 reported: RuntimeError: boom")
    message = rank_failure(255, None, HOSTS, {}, ["-----", "ssh: Could not resolve hostname algo-2", "x"]).render()
    assert message.startswith("mpirun exited with code 255: ssh: Could not resolve hostname algo-2")

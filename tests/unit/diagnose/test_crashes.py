"""crashes.py: a rank's native crash report read line by line (MXNet's and Open MPI's handlers, with mpirun's
tags at the start or in the middle of a line): the first fatal signal, and the innermost frame with a symbol
outside the C/C++ runtimes and the interpreter, its C++ name made readable.

The captures in captures/ are real output (backends/mpi/test_mpirun_report.py says where each comes from); the
MXNet "[bt]" stack is written here in the format MXNet 1.x builds with stack traces print (this image's MXNet
prints none)."""

from pathlib import Path

from sagemaker_mxnet_horovod.backends.mpi.output import MPIRUN
from sagemaker_mxnet_horovod.diagnose.crashes import (
    CrashLog,
    Frame,
    NativeCrash,
    demangle,
    innermost_named_frame,
    readable,
)
from sagemaker_mxnet_horovod.diagnose.job_output import PROGRAM

CAPTURES = Path(__file__).parent / "captures"
MPI_LIB = "/opt/venv/lib/python3.11/site-packages/horovod/mxnet/mpi_lib.cpython-311-x86_64-linux-gnu.so"
ENQUEUE_BROADCAST = ("_ZN7horovod6common22EnqueueTensorBroadcastESt10shared_ptrINS0_9OpContextEES1_INS0_6TensorEES5_i"
                     "NS0_14ReadyEventListERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEiSt8functionIFvRKN"
                     "S0_6StatusEEEi")


def fed(raw_lines, tagged: bool = True, rank: int = 1) -> CrashLog:
    """A CrashLog fed rank `rank`'s lines of a job's stderr as the launcher's pump passes them: cut at mpirun's tags by
    the MPI backend's reader, or (tagged=False: mpirun without --tag-output, a program) every line as it is."""
    log = CrashLog()
    reader = (MPIRUN if tagged else PROGRAM).lines("stderr")
    for raw in raw_lines:
        for line in reader.feed(raw):
            if not tagged or line.rank == rank:
                log.observe(rank, line.text)
    return log


def logged(capture: str, tagged: bool = True, rank: int = 1) -> CrashLog:
    return fed((CAPTURES / capture).read_bytes().splitlines(keepends=True), tagged, rank)


def test_segv_in_horovod_then_abort_while_exiting_names_the_segv_and_horovods_frame():
    # MXNet's handler printed "Segmentation fault: 11" and called exit(); the engine's destructor aborted, and
    # Open MPI's report of that SIGABRT holds the segfault's frames below the trampoline's second appearance.
    crash = logged("ci19-segv-then-abort.txt").crash(1)
    assert crash == NativeCrash(11, Frame(MPI_LIB, ENQUEUE_BROADCAST + "+0x702"))
    assert crash.describe() == ("SIGSEGV (segmentation fault) in horovod::common::EnqueueTensorBroadcast "
                                "(mpi_lib.cpython-311-x86_64-linux-gnu.so)")


def test_mxnet_handler_without_a_stack_names_the_signal_only():
    for capture in ("ctypes-segv-mxnet-handler.txt", "plain-mpirun-segv-exit255.txt"):
        crash = logged(capture, tagged=capture.startswith("ctypes")).crash(1)
        assert crash == NativeCrash(11), capture
        assert crash.describe() == "SIGSEGV (segmentation fault)"


def test_open_mpi_report_with_tags_mid_line():
    crash = logged("ctypes-segv-open-mpi-handler.txt").crash(1)
    assert crash.describe() == "SIGSEGV (segmentation fault) in ffi_call (libffi.so.8)"


def test_frames_of_the_interpreter_and_runtimes_name_nothing():
    assert logged("os-abort-open-mpi-handler.txt").crash(1) == NativeCrash(6)
    assert NativeCrash(6).describe() == "SIGABRT (aborted)"


MXNET_STACK = """
Segmentation fault: 11

Stack trace:
  [bt] (0) /opt/venv/lib/python3.11/site-packages/mxnet/libmxnet.so(dmlc::StackTrace[abi:cxx11](unsigned long)+0x4a) [0x7f403e0a293a]
  [bt] (1) /opt/venv/lib/python3.11/site-packages/mxnet/libmxnet.so(+0x1436b9d) [0x7f403e236b9d]
  [bt] (2) /lib/x86_64-linux-gnu/libc.so.6(+0x3c050) [0x7f404d059050]
  [bt] (3) /lib/x86_64-linux-gnu/libpthread.so.0(pthread_mutex_lock+0x4) [0x7f404d0a7eec]
  [bt] (4) /opt/venv/lib/python3.11/site-packages/mxnet/libmxnet.so(+0x13a0aef) [0x7f403e1a0aef]
  [bt] (5) /opt/venv/lib/python3.11/site-packages/mxnet/libmxnet.so(void mxnet::CopyFromToDnsImpl<mshadow::cpu, mshadow::cpu>(mxnet::NDArray const&, mxnet::NDArray const&, mxnet::RunContext)+0x479) [0x7f403e1a5aab]
  [bt] (6) /opt/venv/lib/python3.11/site-packages/mxnet/libmxnet.so(+0x127aecd) [0x7f403e07aecd]
"""


def test_mxnet_stack_tagged_or_not_skips_the_reporters_frames_and_shortens_demangled_names():
    for tag in ("", "[1,0]<stderr>:"):
        log = fed([f"{tag}{line}\n".encode() for line in MXNET_STACK.splitlines()], tagged=bool(tag), rank=0)
        assert log.crash(0).describe() == ("SIGSEGV (segmentation fault) in mxnet::CopyFromToDnsImpl<...> "
                                           "(libmxnet.so)")


def test_no_report_no_crash_and_other_ranks_are_apart():
    log = logged("ci19-segv-then-abort.txt")
    for line in ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
                 "ValueError: Segmentation fault: 11 is only text here [ 1] in a message"]:
        log.observe(0, line)
    assert log.crash(0) is None
    assert set(log.crashes()) == {1}


def test_frames_outside_a_report_and_reports_beyond_the_first_few_are_ignored():
    log = CrashLog()
    log.observe(0, "[ 1] /opt/lib/libuser.so(user_function+0x1)[0x1]")  # no report yet
    assert log.crash(0) is None
    log.observe(0, "[host:1] *** Process received signal ***")
    log.observe(0, "[host:1] Signal: Bus error (7)")
    log.observe(0, "[host:1] *** End of error message ***")
    log.observe(0, "[host:1] [ 1] /opt/lib/libuser.so(user_function+0x1)[0x1]")  # after the report's end
    for _ in range(100):
        log.observe(0, "Segmentation fault: 11")
    assert log.crash(0) == NativeCrash(7)
    assert len(log.reports[0]) == 4


def test_nested_signal_frames_start_after_the_trampolines_recurrence():
    trampoline = Frame("/lib/x86_64-linux-gnu/libc.so.6", "+0x3c050")
    outer = Frame("/opt/lib/libouter.so", "outer+0x1")
    inner = Frame("/opt/lib/libinner.so", "inner+0x1")
    assert innermost_named_frame([trampoline, outer, trampoline, inner]) == inner
    assert innermost_named_frame([trampoline, outer]) == outer
    assert innermost_named_frame([]) is None


def test_frame_symbols_without_offsets():
    assert Frame("/opt/lib/libx.so", "void x::f<int>(int)+0x4a").symbol == "void x::f<int>(int)"
    assert Frame("python", "PyType_IsSubtype+0").symbol == "PyType_IsSubtype"
    assert Frame("/lib/x86_64-linux-gnu/libc.so.6", "+0x3c050").symbol is None
    assert Frame("python", None).symbol is None


def test_first_report_of_each_rank_is_announced_once_as_it_begins():
    announced = []
    log = CrashLog(on_first_report=announced.append)
    log.observe(0, "rank 0: first allreduce done")
    assert announced == []
    # Open MPI's report: announced at its first line, before the signal line arrives.
    log.observe(1, "[71725b39eb26:00018] *** Process received signal ***")
    assert announced == [1]
    for line in ("[71725b39eb26:00018] Signal: Segmentation fault (11)", "Segmentation fault: 11",
                 "[71725b39eb26:00018] *** Process received signal ***"):
        log.observe(1, line)
    log.observe(0, "Segmentation fault: 11")  # MXNet's
    assert announced == [1, 0]


def test_readable_names_from_libstdcxx_demangler():
    assert demangle("_Z3foov") == "foo()"
    assert readable(ENQUEUE_BROADCAST) == "horovod::common::EnqueueTensorBroadcast"
    assert readable("_ZN7horovod5mxnet18DoHorovodOperationEPvS1_S1_") == "horovod::mxnet::DoHorovodOperation"
    assert readable("_ZN5mxnet6engine23ThreadedEnginePerDeviceD1Ev") == \
        "mxnet::engine::ThreadedEnginePerDevice::~ThreadedEnginePerDevice"
    assert readable("_ZNSt10shared_ptrIN5mxnet6EngineEED1Ev") == "std::shared_ptr<...>::~shared_ptr"
    assert readable("_ZNK5mxnet7NDArray5shapeEv") == "mxnet::NDArray::shape"
    assert readable("_ZN5mxnet2op6SomeOpIN7mshadow3cpuEE7ForwardERKNS_9OpContextE") == \
        "mxnet::op::SomeOp<...>::Forward"
    # A return type before the name, and a template function.
    assert readable("_ZSt16__ostream_insertIcSt11char_traitsIcEERSt13basic_ostreamIT_T0_ES6_PKS3_l") == \
        "std::__ostream_insert<...>"


def test_demangle_leaves_what_is_not_a_cxx_name():
    for symbol in ("ffi_call", "_ZN5mxnet", "_Z99x", "PyInit_QtCore"):
        assert demangle(symbol) == symbol
        assert readable(symbol) == symbol


def test_readable_demangled_names():
    assert readable("void mxnet::CopyFromToDnsImpl<mshadow::cpu, mshadow::gpu>(mxnet::NDArray const&)") == \
        "mxnet::CopyFromToDnsImpl<...>"
    assert readable("PyInit_QtCore") == "PyInit_QtCore"
    assert readable(ENQUEUE_BROADCAST) == "horovod::common::EnqueueTensorBroadcast"

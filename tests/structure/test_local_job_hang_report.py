"""scripts/local_job's one line for a job that timed out (HostResult.stuck_in): where `train stacks` found each
rank's main thread, read from a hang report as a real timed-out job gave it (a parameter-server job whose rank 0
slept; 2026-11-29), trimmed to its frames."""

from pathlib import Path

from local_job.spec import HostResult

REPORT = """== processes (still running at the job's timeout)
PID    PPID ELAPSED     TIME STAT COMMAND
      6       1      29 00:00:00 Sl   /opt/venv/bin/python3 /opt/venv/bin/train
     20       6      28 00:00:00 Ssl  /opt/venv/bin/python3 -m sagemaker_mxnet_horovod.act.rank_program /run/x
== train stacks (still running at the job's timeout)
===== algo-1-rank-0.txt
rank 0 on algo-1 (pid 20), 21:16:25

Thread MainThread (0x7f1a7883d040):
  File "/opt/venv/lib/python3.11/site-packages/mxnet/base.py", line 592, in _notify_shutdown
    check_call(_LIB.MXNotifyShutdown())

Thread Thread-1 (0x7f1a6883d040):
  File "/usr/lib/python3.11/threading.py", line 320, in wait
    waiter.acquire()
===== algo-2-rank-1.txt
rank 1 on algo-2 (pid 13), 21:16:25

Thread MainThread (0x7f4048f62040):
  File "<frozen runpy>", line 88, in _run_code
  File "/opt/ml/code/hang.py", line 8, in <module>
    time.sleep(1000)
===== /opt/ml/output/data/stacks/20261129T211625.270Z-sigusr1/summary.txt
20261129T211625.270Z-sigusr1: SIGUSR1: rank 0 on algo-1, rank 1 on algo-2
"""


def host(report: str) -> HostResult:
    return HostResult("algo-1", None, "", None, Path("/tmp"), hang_report=report)


def test_each_rank_is_named_with_its_main_threads_innermost_frame():
    assert host(REPORT).stuck_in() == ("rank 0 on algo-1 in base.py:592 _notify_shutdown; "
                                       "rank 1 on algo-2 in hang.py:8 <module>")


def test_no_report_or_no_stacks_say_nothing():
    assert host("").stuck_in() == ""
    assert host(REPORT.split("== train stacks")[0] + "== train stacks\nno answer within 40 s").stuck_in() == ""

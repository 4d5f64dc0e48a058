"""ps_run.py: a parameter-server host's run with real processes standing in for the roles (the plan's processes
are data: any program will do) and, for the master, a real handshake with a worker host's end written out by
hand. Success ends the servers and the scheduler; a failed worker, server or scheduler ends the others and names
role and host; a stop reaches the workers first; another host's report decides the verdict it is told. MXNet's
own roles, across real containers: tests/integration, tests/faults."""

import dataclasses
import json
import os
import socket
import sys
import textwrap
import threading
import time

import pytest
from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.backends.parameter_server import ps_run, roles
from sagemaker_mxnet_horovod.backends.parameter_server.ps_run import ParameterServerRun
from sagemaker_mxnet_horovod.core.plan import LocalProcess
from sagemaker_mxnet_horovod.diagnose import host_report
from sagemaker_mxnet_horovod.diagnose.host_report import HostReport
from sagemaker_mxnet_horovod.diagnose.memory import MemoryReading
from unit_helpers import unit_paths
from unit_helpers.plan_cases import config, plan
from unit_helpers.stacks_request import ask_for_stacks_then_release

# A server or scheduler: runs until it is ended, or a minute (then it exits 0: a launcher that waited for it instead
# of ending it finds "exited with code 0" in the log, where these tests look for how it was ended).
SERVE = "import time\ntime.sleep(60)"
PS = {"sagemaker_parameter_server_enabled": "true"}
pytestmark = pytest.mark.usefixtures("restore_signal_handlers")  # the run turns SIGTERM/SIGINT into its events


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class HostEnd:
    """Another host's end of the handshake, by hand: JSON lines over TCP from 127.0.0.1 (localhost's address)."""

    def __init__(self, port: int):
        deadline = time.monotonic() + 10
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)  # the master's listen() has no notification to await
        self.lines = self.sock.makefile("r")

    def send(self, **message) -> None:
        self.sock.sendall((json.dumps(message) + "\n").encode())

    def receive(self) -> dict:
        while (message := json.loads(self.lines.readline()))["type"] == "heartbeat":
            pass
        return message

    def close(self) -> None:
        self.lines.close()
        self.sock.close()


def role(name: str, code: str) -> LocalProcess:
    return LocalProcess(name, name.split()[0], (sys.executable, "-c", code), {"DMLC_ROLE": name.split()[0]}, ".")


def one_host(tmp_path, worker_code: str, server_code: str = SERVE, workers: int = 1, hps=None):
    """A one-host parameter-server plan whose processes are stand-ins: scheduler, server 0, the workers."""
    p = plan(config(hosts=("algo-1",), hps={**PS, **(hps or {})}))
    processes = (role("scheduler", SERVE), role("server 0", server_code),
                 *(role(f"worker {index}", worker_code) for index in range(workers)))
    return dataclasses.replace(p, processes=processes, run_dir=str(tmp_path / "run"))


def run(p, tmp_path):
    return ParameterServerRun(p, dict(os.environ), "127.0.0.1", tmp_path / "failure").run()


def ended_by_the_launcher(err: str) -> str:
    """How the processes still running at the verdict ended: the launcher's line after its 'ending ...' ('' if none)."""
    lines = err.splitlines()
    ending = next((index for index, line in enumerate(lines) if line.startswith("train: ending ")), None)
    if ending is None:
        return ""
    first = lines[ending].removeprefix("train: ending ").split(", ")[0]
    return next((line for line in lines[ending + 1:] if line.startswith(f"train: {first} ")), "")


def test_every_worker_done_is_success_and_ends_the_servers_and_scheduler(tmp_path, capfd):
    outcome = run(one_host(tmp_path, "print('epoch=1 done')", workers=2), tmp_path)
    assert outcome.failure is None and outcome.exit_code == 0
    err = capfd.readouterr().err
    assert "train: ending scheduler, server 0" in err
    assert "train: scheduler was killed by SIGTERM; server 0 was killed by SIGTERM" in err


def test_a_failed_worker_ends_the_job_naming_it(tmp_path, capfd):
    code = "import sys\nprint('Traceback (most recent call last):', file=sys.stderr)\nraise ValueError('bad batch')"
    outcome = run(one_host(tmp_path, code), tmp_path)
    assert outcome.exit_code == 1
    assert ended_by_the_launcher(capfd.readouterr().err) == ("train: scheduler was killed by SIGTERM; server 0 was "
                                                             "killed by SIGTERM")
    assert outcome.failure.render().splitlines()[:2] == ["worker 0 on algo-1 exited with code 1: ValueError: bad batch",
                                                         "--- last lines of worker 0 stderr ---"]


def test_a_server_that_dies_ends_the_workers_naming_it(tmp_path, capfd):
    # The worker waits for its server forever, as ps-lite would.
    outcome = run(one_host(tmp_path, SERVE, server_code="import os\nos.kill(os.getpid(), 9)"), tmp_path)
    assert outcome.exit_code == 137  # as the server ended (SIGKILL)
    assert ended_by_the_launcher(capfd.readouterr().err) == ("train: scheduler was killed by SIGTERM; worker 0 was "
                                                             "killed by SIGTERM")
    assert outcome.failure.cause == ("server 0 on algo-1 was killed by SIGKILL before the workers were done (they "
                                     "wait for the server forever)")


def test_a_worker_that_leaves_the_others_behind(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(roles, "WORKERS_FINISH_TOGETHER_S", 1.0)
    worker = "import os, time\nif os.environ['NAME'] == 'worker 1': time.sleep(60)"
    p = one_host(tmp_path, worker, workers=2)
    p = dataclasses.replace(p, processes=tuple(dataclasses.replace(process, env={**process.env, "NAME": process.name})
                                               for process in p.processes))
    outcome = run(p, tmp_path)
    assert outcome.exit_code == 1
    assert outcome.failure.cause.startswith("worker 0 on algo-1 finished, and worker 1 on algo-1 was still training "
                                            "1 s later")
    assert "; worker 1 was killed by SIGTERM" in ended_by_the_launcher(capfd.readouterr().err)


def test_a_worker_whose_script_returned_counts_as_finished_while_it_waits_at_exit(tmp_path, monkeypatch, capfd):
    # Worker 0's script returns and its process then waits (as in ps-lite's barrier at exit) for worker 1, which
    # never finishes: neither process ends by itself, and the job still fails, naming them.
    monkeypatch.setattr(roles, "WORKERS_FINISH_TOGETHER_S", 1.0)
    (tmp_path / "code").mkdir()
    script = tmp_path / "code" / "train.py"
    script.write_text("import atexit, os, time\natexit.register(lambda: time.sleep(60))\n"
                      "if os.environ['NAME'] == 'worker 1': time.sleep(60)\n")
    p = one_host(tmp_path, "", workers=2)
    rank_argv = (sys.executable, "-m", "sagemaker_mxnet_horovod.act.rank_program", str(tmp_path / "run"),
                 str(tmp_path / "code"), "--", sys.executable, str(script))
    p = dataclasses.replace(p, processes=tuple(
        dataclasses.replace(process, env={**process.env, "NAME": process.name,
                                          "PYTHONPATH": os.pathsep.join(sys.path)},
                            argv=rank_argv if process.role == "worker" else process.argv)
        for process in p.processes))
    outcome = run(p, tmp_path)
    assert outcome.exit_code == 1
    assert outcome.failure.cause.startswith("worker 0 on algo-1 finished, and worker 1 on algo-1 was still training")
    assert "; worker 0 was killed by SIGTERM; worker 1 was killed by SIGTERM" in ended_by_the_launcher(
        capfd.readouterr().err)


def test_sigterm_stops_the_workers_first_and_the_job_exits_143(tmp_path, capfd):
    # The worker stops the launcher itself (SageMaker's SIGTERM) once the server runs and its own handler is in
    # place; on SIGTERM it records whether the server still serves it (it must: a checkpoint may need it), then
    # exits 143 as the built-in programs do.
    worker = ("import os, signal, sys, time\n"
              "def stop(*_):\n"
              "    try:\n        os.kill(int(open(os.environ['PIDFILE']).read()), 0)\n        seen = 'alive'\n"
              "    except ProcessLookupError:\n        seen = 'gone'\n"
              "    open(os.environ['PIDFILE'] + '.seen', 'w').write(seen)\n    sys.exit(143)\n"
              "signal.signal(signal.SIGTERM, stop)\n"
              "while not os.path.exists(os.environ['PIDFILE']): time.sleep(0.01)\n"
              "os.kill(os.getppid(), signal.SIGTERM)\ntime.sleep(60)")
    server = "import os, time\nopen(os.environ['PIDFILE'], 'w').write(str(os.getpid()))\ntime.sleep(60)"
    p = one_host(tmp_path, worker, server_code=server)
    pidfile = tmp_path / "server.pid"
    p = dataclasses.replace(p, processes=tuple(dataclasses.replace(process, env={**process.env, "PIDFILE": str(pidfile)})
                                               for process in p.processes))
    outcome = run(p, tmp_path)
    assert outcome.exit_code == 143
    assert outcome.failure.cause == "stopped by SIGTERM (SageMaker stop or spot interruption); every worker had ended"
    assert (tmp_path / "server.pid.seen").read_text() == "alive"
    assert ended_by_the_launcher(capfd.readouterr().err) == ("train: scheduler was killed by SIGTERM; server 0 was "
                                                             "killed by SIGTERM")


def test_workers_still_running_at_the_end_of_the_stop_grace_are_killed(tmp_path, monkeypatch, capfd):
    # A worker that ignores SIGTERM (stuck in native code, say) once it has stopped the launcher: killed when the
    # grace ends (1 s here; SageMaker's SIGKILL comes 120 s after its SIGTERM), and the job then ends as stopped.
    # Were it left running, the master's verdict would wait out its own grace and say the workers had not ended.
    monkeypatch.setattr(ps_run, "STOP_GRACE_S", 1.0)
    worker = ("import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "os.kill(os.getppid(), signal.SIGTERM)\ntime.sleep(60)")
    outcome = run(one_host(tmp_path, worker), tmp_path)
    assert outcome.exit_code == 143
    assert outcome.failure.cause == "stopped by SIGTERM (SageMaker stop or spot interruption); every worker had ended"
    err = capfd.readouterr().err
    assert "train: workers still running 1 s after the stop: killing them" in err
    assert "train: worker 0 was killed by SIGKILL" in err


def test_the_master_decides_from_another_hosts_report_and_tells_it(tmp_path, capfd):
    port = free_port()
    p = plan(config(hosts=("algo-1", "localhost"), hps={**PS, "mpi_handshake_port": str(port)}))
    p = dataclasses.replace(p, processes=(role("scheduler", SERVE), role("server 0", SERVE), role("worker 0", SERVE)),
                            run_dir=str(tmp_path))
    seen = {}

    def other_host() -> None:  # localhost's end, by hand, while the master runs in this (the main) thread
        peer = HostEnd(port)
        peer.send(type="hello", host="localhost", version=__version__)
        seen["welcome"] = peer.receive()
        peer.send(type="failed", failure="worker 1 on localhost exited with code 1: ValueError: bad batch")
        seen["asked"] = peer.receive()  # its memory, for the end-of-job line, before the verdict
        peer.send(type="host_report", report=HostReport(MemoryReading(peak_bytes=3 << 30),
                                                        MemoryReading(peak_bytes=3 << 30)).to_message())
        seen["done"] = peer.receive()
        peer.send(type="bye", user_failure="my own words")
        peer.close()

    threading.Thread(target=other_host, daemon=True).start()
    outcome = run(p, tmp_path)
    assert seen["welcome"] == {"type": "welcome"}  # no keys: nothing runs over ssh
    assert seen["asked"] == {"type": "report_request"}
    err = capfd.readouterr().err
    assert "localhost 3 GiB" in err  # the peak memory line names every host's
    assert ended_by_the_launcher(err) == ("train: scheduler was killed by SIGTERM; server 0 was killed by SIGTERM; "
                                          "worker 0 was killed by SIGTERM")  # its own processes, which would go on
    assert (seen["done"]["type"], seen["done"]["exit_code"]) == ("done", 1)
    assert seen["done"]["failure"] == "worker 1 on localhost exited with code 1: ValueError: bad batch"
    assert outcome.failure.cause == "worker 1 on localhost exited with code 1: ValueError: bad batch"
    assert outcome.failure.host == "localhost" and outcome.other_hosts_texts == (("localhost", "my own words"),)


def test_each_process_has_its_own_log_and_the_console_shows_the_chosen_workers(tmp_path, capfd):
    code = "import os\nprint('epoch=1 of worker', os.environ['SMMH_WORKER_RANK'])"
    p = one_host(tmp_path, code, workers=2)
    workers = [dataclasses.replace(process, env={**process.env, "SMMH_WORKER_RANK": process.name.split()[1]})
               for process in p.processes[2:]]
    p = dataclasses.replace(p, processes=(*p.processes[:2], *workers), output_data_dir=str(tmp_path / "data"),
                            console_ranks=frozenset({1}))
    outcome = run(p, tmp_path)
    assert outcome.exit_code == 0
    logs = tmp_path / "data" / "logs"
    assert (logs / "algo-1-rank-0.log").read_text() == "epoch=1 of worker 0\n"  # as an MPI rank's log
    assert (logs / "algo-1-rank-1.log").read_text() == "epoch=1 of worker 1\n"
    assert {path.name for path in logs.iterdir()} == {"algo-1-rank-0.log", "algo-1-rank-1.log"}  # the others: silent
    out = capfd.readouterr().out
    assert "[worker 1] epoch=1 of worker 1" in out and "worker 0" not in out  # mpi_console_ranks=1


def test_a_process_killed_while_the_oom_killer_counted_a_kill_is_named_out_of_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(ps_run, "read_memory", lambda: MemoryReading(limit_bytes=1 << 30, oom_kills=0))
    monkeypatch.setattr(host_report, "read_memory", lambda: MemoryReading(limit_bytes=1 << 30, peak_bytes=1 << 30,
                                                                          oom_kills=1))
    outcome = run(one_host(tmp_path, "import os\nos.kill(os.getpid(), 9)"), tmp_path)
    assert outcome.exit_code == 137
    assert outcome.failure.cause.startswith("algo-1 ran out of memory: the kernel's OOM killer killed worker 0 "
                                            "(SIGKILL); container limit 1 GiB, peak usage 1 GiB of 1 GiB")


@pytest.mark.parametrize("size, named", [(16 << 20, True), (30 << 30, False)])
def test_a_process_dead_of_sigbus_where_dev_shm_is_small_is_named_its_victim(tmp_path, size, named):
    # The plan's budget (this host's /dev/shm and the job's need) decides; the process dies of SIGBUS itself, as a
    # worker touching a page of a full /dev/shm does, with no line saying so.
    p = one_host(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGBUS)", hps={"num_workers": "2"})
    p = dataclasses.replace(p, shm=dataclasses.replace(p.shm, size_bytes=size))
    outcome = run(p, tmp_path)
    assert outcome.exit_code == 135  # as the worker ended (128 + SIGBUS)
    if named:
        assert outcome.failure.cause.startswith(
            "/dev/shm too small: worker 0 on algo-1 died of Bus error: SIGBUS on a page of a full /dev/shm ('killed "
            "by SIGBUS'); /dev/shm there is 16 MiB, smaller than the about 128 MiB (1 rank x 2 data-loader workers "
            "(num_workers) x 64 MiB) this job needs")
    else:  # a large /dev/shm: SIGBUS has another cause, named by the signal
        assert outcome.failure.cause == "worker 0 on algo-1 was killed by SIGBUS"


# A worker blocked opening a FIFO nobody writes yet (native code), until the test lets it go. It says when it is
# in wait_for_release (fifo + ".waiting"): a worker still importing when asked has other stacks.
WAITING_WORKER = textwrap.dedent("""
    import sys
    def wait_for_release(fifo):
        open(fifo + ".waiting", "w").close()
        open(fifo).close()
    wait_for_release(sys.argv[1])
""")


def test_sigusr1_writes_every_workers_stacks_and_the_job_goes_on(tmp_path, capfd):
    (tmp_path / "train.py").write_text(WAITING_WORKER)
    os.mkfifo(tmp_path / "release")
    p = one_host(tmp_path, "")
    worker = dataclasses.replace(p.processes[2], argv=(
        sys.executable, "-m", "sagemaker_mxnet_horovod.act.rank_program", p.run_dir, str(tmp_path), "--",
        sys.executable, str(tmp_path / "train.py"), str(tmp_path / "release")),
        env={**p.processes[2].env, "SMMH_WORKER_RANK": "0"})
    p = dataclasses.replace(p, processes=(*p.processes[:2], worker), output_data_dir=str(tmp_path / "data"))
    problems = ask_for_stacks_then_release(tmp_path)
    outcome = ParameterServerRun(p, {**os.environ, "PYTHONPATH": str(unit_paths.SRC)}, "127.0.0.1",
                                 tmp_path / "failure").run()
    assert problems == [] and outcome.exit_code == 0
    assert ended_by_the_launcher(capfd.readouterr().err) == ("train: scheduler was killed by SIGTERM; server 0 was "
                                                             "killed by SIGTERM")
    (dump,) = (tmp_path / "data" / "stacks").iterdir()
    assert "in wait_for_release" in (dump / "algo-1-rank-0.txt").read_text()

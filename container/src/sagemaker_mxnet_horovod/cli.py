"""`train`: the command SageMaker runs in every container of a training job.

parse (config.py) -> plan (plan.py) -> act (this file, cluster.py, supervise.py). Every failure path
writes /opt/ml/output/failure and exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.config import ConfigError, Paths, load_training_config
from sagemaker_mxnet_horovod.failure import (
    clear_previous_outcome,
    compose_failure,
    describe_exit,
    parse_mpirun_failure,
    process_failure_message,
    rank_failure_message,
    rank_host,
    read_user_failure,
    write_failure,
    write_success,
)
from sagemaker_mxnet_horovod.outputs import copy_stray_outputs
from sagemaker_mxnet_horovod.plan import (
    DEFAULT_ENTRYPOINTS_DIR,
    DEFAULT_RUN_DIR,
    Plan,
    describe,
    make_plan,
    rank_environment,
)
from sagemaker_mxnet_horovod.programs import Program

EXIT_CONFIG = 2  # the job's configuration is wrong; nothing ran
DAEMON_EXIT_GRACE_S = 15.0  # after a worker's MPI daemon exits, how long mpirun may take to end the job
# After a rank's crash report, how long the job may take to end. MXNet's SIGSEGV handler calls exit() on the
# crashed thread, which can hang in a library's exit handler; mpirun then waits for that rank forever.
CRASH_EXIT_GRACE_S = 30.0


class StopRequested(Exception):
    """SIGTERM/SIGINT arrived before the job started."""


def log(message: str) -> None:
    print(f"train: {message}", file=sys.stderr, flush=True)


def fail(paths: Paths, message: str, code: int = 1, other_hosts_texts=()) -> int:
    """Write the failure file: what the user's program wrote there during the job (this host's, then other
    hosts' (host, text) pairs) first, then the launcher's message."""
    own = read_user_failure(paths.failure_file)
    written = write_failure(paths.failure_file, compose_failure(message, [(None, own), *other_hosts_texts]))
    log(f"FAILED: {written}")
    return code


def succeed(paths: Paths, code: int) -> int:
    """After a successful job, the empty `success` file the toolkit writes, on every host."""
    if code == 0:
        write_success(paths.output_dir)
    return code


def _raise_stop(signum, _frame):
    raise StopRequested(signal.Signals(signum).name)


def fetch_user_code(program: Program) -> None:
    """The user's code into the code directory: reuse the toolkit's download/extract (S3 or local)."""
    # The toolkit is imported only when there is work for it: it pulls in boto3 (~0.2 s of every start).
    if program.submit_directory != program.code_dir:
        from sagemaker_training import files

        files.download_and_extract(program.submit_directory, program.code_dir)


def install_user_code(plan: Plan) -> None:
    """As the toolkit, for the entry point's kind (decided on the fetched code): a package is pip-installed with
    its requirements.txt, a script gets its requirements.txt, a command is made executable."""
    program = plan.program
    code_dir = Path(program.code_dir)
    package = program.kind == "package"
    if package or (code_dir / "requirements.txt").exists():
        from sagemaker_training import modules

        # The toolkit's pip runs with this process's environment: give it the plan's pip settings (the
        # warm pool's cache directory, see env_rules.warm_pool_cache).
        os.environ.update({name: value for name, value in plan.env.items() if name.startswith("PIP_")})
        if package:  # `pip install . [-r requirements.txt]`; the ranks run it as a module
            log(f"installing the Python package in {code_dir}")
            modules.install(str(code_dir), capture_error=True)
        else:
            log(f"installing {code_dir / 'requirements.txt'}")
            modules.install_requirements(str(code_dir), capture_error=True)
    script = code_dir / program.name
    if not package and not script.exists():
        raise ConfigError(f"sagemaker_program {program.name!r} is not in sagemaker_submit_directory "
                          f"{program.submit_directory} (contents: {sorted(p.name for p in code_dir.iterdir())})")
    if program.kind == "command" and not os.access(script, os.X_OK):  # run through its #! line, as the toolkit
        script.chmod(script.stat().st_mode | 0o111)


def is_python_package(code_dir: Path) -> bool:
    """The toolkit's test for a Python-package entry point: a setup.py in the code directory."""
    return (code_dir / "setup.py").is_file()


def bind_address(plan: Plan, facts) -> str:
    return next((ip for name, ip in facts.interface_addresses if name == plan.interface), "")


def run_single_or_master(plan: Plan, env: dict, paths: Paths, facts) -> int:
    from sagemaker_mxnet_horovod.cluster import ClusterError, Master, generate_key
    from sagemaker_mxnet_horovod.crashes import CrashLog
    from sagemaker_mxnet_horovod.hangs import StallLog, hang_cause
    from sagemaker_mxnet_horovod.supervise import Job, forward_stop_signals

    master = None
    if plan.workers:
        started = time.monotonic()
        run_dir = Path(plan.run_dir)
        key = generate_key(run_dir / "id_ed25519")
        master = Master(plan.workers, plan.handshake_port, bind_address(plan, facts), run_dir,
                        deadline=started + plan.peer_timeout_s)
        try:
            # No separate ssh check: it cost a round trip per job, and mpirun's own ssh error, when there is
            # one, becomes the first line of the failure file.
            master.gather(key)
        except ClusterError as error:
            message = f"cluster setup failed on master {plan.current_host}: {error}"
            master.finish(1, message)
            return fail(paths, message)
        except StopRequested as stop:
            master.finish(143, f"stopped by {stop} during cluster setup")
            return fail(paths, f"stopped by {stop} while waiting for workers", 143)
        log(f"{len(plan.workers)} worker(s) ready in {time.monotonic() - started:.2f} s")

    def on_crash_report(rank: int) -> None:
        def reason() -> str:
            crash = crash_log.crash(rank)
            host = rank_host(plan.rank_hosts, rank, plan.current_host)
            return (f"rank {rank} on {host} crashed" + (f" with {crash.describe()}" if crash else "")
                    + f" and the job had not ended {CRASH_EXIT_GRACE_S:g} s later (a crash handler hung while "
                    "exiting): the launcher stopped it")
        job.abort_later(CRASH_EXIT_GRACE_S, reason)

    stall_log, crash_log = StallLog(), CrashLog(on_first_report=on_crash_report)
    job = Job(plan.command, env, tagged=plan.use_mpi, stderr_observers=(stall_log.observe, crash_log.observe))
    forward_stop_signals(job, on_stop=master.broadcast_stop if master else None)
    if master:
        master.on_worker_lost = lambda host, how: job.abort(f"worker {host} {how}")

        def on_daemon_exited(host: str) -> None:
            # At the job's end mpirun exits within moments of its daemons; one that died mid-job leaves
            # mpirun waiting forever.
            job.abort_later(DAEMON_EXIT_GRACE_S, f"mpirun's daemon on {host} exited and mpirun was still waiting "
                            f"for it {DAEMON_EXIT_GRACE_S:g} s later: orted died there without mpirun noticing")

        master.on_daemon_exited = on_daemon_exited
    started = time.monotonic()
    job.start()
    if master:
        def watch_launch() -> None:
            missing = master.wait_launched(started + plan.peer_timeout_s)
            if missing:
                job.abort(f"mpirun started no MPI daemon on {', '.join(missing)} within {plan.peer_timeout_s:g} s "
                          "(mpi_peer_timeout_s): ssh or orted failed there without mpirun noticing")

        threading.Thread(target=watch_launch, daemon=True).start()
    result = job.wait()
    log(f"job {describe_exit(result.returncode)} after {time.monotonic() - started:.1f} s")

    failure = None
    code = result.returncode if result.returncode >= 0 else 128 - result.returncode
    if code != 0:
        if result.stopped_by_signal is not None:
            failure = (f"stopped by {signal.Signals(result.stopped_by_signal).name} (SageMaker stop or spot "
                       f"interruption); the job {describe_exit(result.returncode)}"
                       + ("; killed after the grace period" if result.killed_after_grace else ""))
        elif plan.use_mpi:
            failure = rank_failure_message(result.returncode, parse_mpirun_failure(result.untagged_tail),
                                           plan.rank_hosts, result.rank_stderr, result.untagged_tail,
                                           crash_log.crashes())
        else:
            failure = process_failure_message(plan.program.name, plan.current_host, result.returncode,
                                              result.rank_stderr.get(0, ()), crash_log.crash(0))
        cause = result.abort_reason or hang_cause(stall_log, result.rank_stderr, plan.rank_hosts, plan.rank_env)
        if cause:
            # The launcher's own finding (or a hang watch's) is the cause; what mpirun said about it follows.
            failure = f"{cause}\n{failure}"
    if master:
        released = time.monotonic()
        master.finish(code, failure, user_failure=read_user_failure(paths.failure_file) if code else None)
        log(f"{len(plan.workers)} worker(s) released in {time.monotonic() - released:.2f} s")
    if failure:
        return fail(paths, failure, code, sorted(master.user_failures.items()) if master else ())
    return 0


def run_worker(plan: Plan, paths: Paths, facts) -> int:
    from sagemaker_mxnet_horovod.cluster import ClusterError, Sshd, serve_master
    from sagemaker_mxnet_horovod.supervise import signal_local_ranks

    stop_requested = threading.Event()
    ready = threading.Event()

    def on_signal(signum, frame):
        if not ready.is_set():
            _raise_stop(signum, frame)
        # SageMaker stops every host at once: let this host's ranks checkpoint, then wait for the master.
        signal_local_ranks(signum)
        stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sshd = Sshd(Path(plan.run_dir), bind_address(plan, facts) or None)
    try:
        ready.set()  # from here the worker waits for the master's verdict even when stopped
        outcome = serve_master(plan.master_host, plan.handshake_port, plan.current_host, sshd,
                               time.monotonic() + plan.peer_timeout_s, stop_requested, paths.failure_file)
    except ClusterError as error:
        return fail(paths, f"worker {plan.current_host}: {error}")
    except StopRequested as stop:
        return fail(paths, f"worker {plan.current_host} stopped by {stop} before the job started", 143)
    finally:
        sshd.stop()
    if outcome.exit_code:
        return fail(paths, f"worker {plan.current_host}: {outcome.failure}", outcome.exit_code,
                    [(plan.master_host, outcome.master_user_failure)])
    log(f"job finished on {plan.master_host}; worker {plan.current_host} done")
    return 0


def plan_job(config, facts, env: dict) -> Plan:
    return make_plan(config, facts, env, python=sys.executable,
                     entrypoints_dir=env.get("SMMH_ENTRYPOINTS_DIR", DEFAULT_ENTRYPOINTS_DIR),
                     run_dir=env.get("SMMH_RUN_DIR", DEFAULT_RUN_DIR),
                     code_is_package=is_python_package(config.paths.code_dir))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="train", description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan for this host and exit")
    parser.add_argument("--version", action="version", version=f"sagemaker-mxnet-horovod {__version__}")
    parser.add_argument("--sdk-v3-driver", metavar="DIR", type=Path,
                        help="run the SDK v3 MPI job described in DIR (its sm_drivers channel): see docs/sdk-v3.md")
    args = parser.parse_args(argv)

    from sagemaker_mxnet_horovod import facts as host_facts

    env = dict(os.environ)
    paths = Paths(Path(env.get("SAGEMAKER_BASE_DIR", "/opt/ml")))
    if not args.dry_run:
        # Whatever is there at the end must be this job's: its user's program's failure text, our verdict.
        for removed in clear_previous_outcome(paths.output_dir):
            log(f"removed {removed}, left by an earlier run in this directory")
    signal.signal(signal.SIGTERM, _raise_stop)
    try:
        if args.sdk_v3_driver:
            from sagemaker_mxnet_horovod import sdk_v3

            env = sdk_v3.load_driver_env(args.sdk_v3_driver, paths.data_dir, env)
        config = load_training_config(env)
        if args.sdk_v3_driver:
            env.update(sdk_v3.host_env(config.resource.hosts, config.resource.current_host))
        facts = host_facts.gather(env)
        plan = plan_job(config, facts, env)
    except ConfigError as error:
        return fail(paths, f"invalid job configuration: {error}", EXIT_CONFIG)
    except StopRequested as stop:
        return fail(paths, f"stopped by {stop} before the job started", 143)

    if args.dry_run:
        print(describe(plan, env))
        return 0
    for line in describe(plan, env).splitlines():
        log(line)

    try:
        for directory in (paths.model_dir, paths.output_data_dir, paths.code_dir, Path(plan.run_dir)):
            directory.mkdir(parents=True, exist_ok=True)
        if not plan.program.builtin:
            fetch_user_code(plan.program)
            if (plan.program.kind == "package") != is_python_package(config.paths.code_dir):
                plan = plan_job(config, facts, env)  # the fetched code has (or lacks) a setup.py: run it so
                log(f"entry point: {' '.join(plan.program.argv)}")
            install_user_code(plan)
        if plan.use_mpi:
            rank_env_file = Path(plan.run_dir) / "rank-env.json"
            rank_env_file.touch(mode=0o600)  # the container's environment may hold credentials
            rank_env_file.write_text(json.dumps(rank_environment(plan, env)))
    except ConfigError as error:
        return fail(paths, f"invalid job configuration: {error}", EXIT_CONFIG)
    except StopRequested as stop:
        return fail(paths, f"stopped by {stop} before the job started", 143)
    except Exception as error:  # noqa: BLE001 - any setup failure must reach the failure file
        return fail(paths, f"setup failed on {plan.current_host}: {type(error).__name__}: {error}")

    try:
        if plan.role == "worker":
            return succeed(paths, run_worker(plan, paths, facts))
        return succeed(paths, run_single_or_master(plan, {**env, **plan.env}, paths, facts))
    except StopRequested as stop:
        return fail(paths, f"stopped by {stop} before the job started", 143)
    except Exception as error:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        return fail(paths, f"launcher error on {plan.current_host}: {type(error).__name__}: {error}")
    finally:
        copy_stray_outputs(plan.stray_outputs, log)  # files written where SageMaker would not upload them


if __name__ == "__main__":
    sys.exit(main())

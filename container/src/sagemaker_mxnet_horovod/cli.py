"""`train`: the command SageMaker runs in every container of a training job. `train stacks` (docker exec) writes
every rank's Python stack on every host to the log and output/data/stacks/ without stopping the job.

parse (parse/: the config files, this host) -> plan (plan/: argv and environment as data, by the backend
backends/registry.py chooses) -> act (act/prepare.py readies this host, then the backend's run) -> the outcome
files. A stop is handled from the start, once (core/stop.py). Every failure path, whatever the step, becomes one
Failure written to /opt/ml/output/failure, and `train` exits non-zero with its code (failure_of).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.act import stacks, straggler_report
from sagemaker_mxnet_horovod.act.outcome_files import (
    clear_previous_outcome,
    copy_stray_outputs,
    write_failure_file,
    write_success,
)
from sagemaker_mxnet_horovod.backends import registry
from sagemaker_mxnet_horovod.core import stop
from sagemaker_mxnet_horovod.core.exits import EXIT_CONFIG, EXIT_FAILED, ConfigError, SetupError, StopRequested
from sagemaker_mxnet_horovod.core.failure import Failure
from sagemaker_mxnet_horovod.core.log import log
from sagemaker_mxnet_horovod.core.outcome import Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.launch_rules import DEFAULT_ENTRYPOINTS_DIR
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import TrainingConfig, load_training_config
from sagemaker_mxnet_horovod.plan.job_plan import DEFAULT_RUN_DIR, describe


@dataclass
class Step:
    """The step `train` is in, for the failure of an error nobody expected: what failed, and where."""

    label: str = "launcher error"  # "launcher error on algo-1: KeyError: ..."
    host: str = "this host"


def failure_of(error: BaseException, step: Step) -> Failure:
    """The one map from an error that ends `train` to its Failure and exit code: 2 for the configuration, 143 for a
    stop (core/stop.py says it), 1 for the rest, whose traceback goes to the log."""
    if isinstance(error, ConfigError):
        return Failure(f"invalid job configuration: {error}", EXIT_CONFIG)
    if isinstance(error, StopRequested):
        return stop.stopped(error.signum, "the job had not started")
    if isinstance(error, SetupError):  # its message says it all: no traceback
        return Failure(f"{step.label} on {step.host}: {error}", EXIT_FAILED, host=step.host)
    traceback.print_exc()
    return Failure(f"{step.label} on {step.host}: {type(error).__name__}: {error}", EXIT_FAILED, host=step.host)


def report(paths: Paths, outcome: Outcome) -> int:
    """Write this host's outcome file: `success` (empty, as the toolkit), or the failure."""
    if outcome.failure is None:
        write_success(paths.output_dir)
    else:
        log(f"FAILED: {write_failure_file(paths.failure_file, outcome.failure, outcome.other_hosts_texts)}")
    return outcome.exit_code


def parse(args: argparse.Namespace, env: dict, paths: Paths) -> tuple[TrainingConfig, HostFacts, dict]:
    """The job's configuration and this host's facts (SDK v3's driver files first, when given; the Debugger's and
    the Profiler's files with it, and the checkpoint and TensorBoard ones)."""
    from sagemaker_mxnet_horovod.compat import debugger
    from sagemaker_mxnet_horovod.parse import host_facts, output_config

    if args.sdk_v3_driver:
        from sagemaker_mxnet_horovod.compat import sdk_v3

        env = sdk_v3.load_driver_env(args.sdk_v3_driver, paths.data_dir, env)
    config = load_training_config(env, env.get("SMMH_ENTRYPOINTS_DIR", DEFAULT_ENTRYPOINTS_DIR),
                                  debugger.read_configs(paths.config_dir))
    config = output_config.apply(config, paths.config_dir)  # checkpoint and TensorBoard LocalPaths
    if args.sdk_v3_driver:
        env.update(sdk_v3.host_env(config.resource.hosts, config.resource.current_host))
    return config, host_facts.gather(env), env


def plan_job(config: TrainingConfig, facts: HostFacts, env: dict, paths: Paths) -> Plan:
    from sagemaker_mxnet_horovod.act.prepare import is_python_package

    return registry.plan_job(config, facts, env, python=sys.executable,
                             entrypoints_dir=env.get("SMMH_ENTRYPOINTS_DIR", DEFAULT_ENTRYPOINTS_DIR),
                             run_dir=env.get("SMMH_RUN_DIR", DEFAULT_RUN_DIR),
                             code_is_package=is_python_package(paths.code_dir))


def act(plan: Plan, env: dict, paths: Paths, facts: HostFacts) -> Outcome:
    """This host's part of the job, as its backend runs it, bound to this host's address on the cluster interface."""
    return registry.run(plan, env, paths, facts.address_of(plan.interface))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="train", description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan for this host and exit")
    parser.add_argument("--version", action="version", version=f"sagemaker-mxnet-horovod {__version__}")
    parser.add_argument("--sdk-v3-driver", metavar="DIR", type=Path,
                        help="run the SDK v3 MPI job described in DIR (its sm_drivers channel): see docs/sdk-v3.md")
    parser.add_argument("command", nargs="?", choices=["stacks"],
                        help="stacks: ask this container's running train for every rank's Python stack on every host "
                             "(written to its log and output/data/stacks/), print this host's, and exit")
    args = parser.parse_args(argv)

    started, env = time.time(), dict(os.environ)
    paths = Paths(Path(env.get("SAGEMAKER_BASE_DIR", "/opt/ml")))
    if args.command == "stacks":
        return stacks.request_and_show(env.get("SMMH_RUN_DIR", DEFAULT_RUN_DIR), paths.output_data_dir / "stacks")
    if not args.dry_run:
        # Whatever is there at the end must be this job's: its user's program's failure text, our verdict.
        for removed in clear_previous_outcome(paths.output_dir):
            log(f"removed {removed}, left by an earlier run in this directory")
        stacks.serve_requests(env.get("SMMH_RUN_DIR", DEFAULT_RUN_DIR), None, log)  # until the job runs
    stop.install()
    step, running = Step(), None
    try:
        config, facts, env = parse(args, env, paths)
        plan = plan_job(config, facts, env, paths)
        if args.dry_run:
            print(describe(plan, env))
            return 0
        for line in describe(plan, env).splitlines():
            log(line)
        from sagemaker_mxnet_horovod.act.prepare import prepare_host

        step = Step("setup failed", plan.current_host)
        plan = prepare_host(plan, paths, lambda: plan_job(config, facts, env, paths), log)
        step, running = Step("launcher error", plan.current_host), plan
        outcome = act(plan, env, paths, facts)
    except Exception as error:  # noqa: BLE001 - whatever ends the job must reach the failure file
        outcome = Outcome(failure_of(error, step))
    finally:
        if running is not None:
            copy_stray_outputs(running.stray_outputs, log)  # files written where SageMaker would not upload them
    if running is not None:  # where rank 0 wrote it: its verdict, its path, its chart
        straggler_report.finish(straggler_report.report_directory(running.env, env), started, stop.seconds_to_kill(),
                                log)
    return report(paths, outcome)


if __name__ == "__main__":
    sys.exit(main())

"""The fault suite's harness: a scenario as data (how to cause the fault, what every host must do), the context it
runs in, and what was observed; running one under this image's launcher or under the sagemaker-training toolkit's
MPI runner (same image), judging it against its expectations, and the report table. The scenarios themselves:
scenarios.py.

The moment of the fault: the job's start for configuration faults, the injector's action for container
faults, and the failing rank's own record (allreduce.py writes output/data/fault-at) for rank faults.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from local_job import DOCKER, JobSpec, run_job
from local_job.toolkit import as_toolkit_job

ROOT = Path(__file__).resolve().parents[2]

CODE_DIR = ROOT / "tests" / "integration" / "code"
FAULT_CODE_DIR = ROOT / "tests" / "faults" / "code"  # programs only this suite runs
OBSERVATIONS: list = []  # filled by test_faults.py, printed as the report table by conftest.py
JOB_TIMEOUT_S = 240.0  # the harness kills a job still running after this (the toolkit waits up to an hour)

# Expected exit codes: an int, or one of these.
NONZERO = "non-zero"
KILLED = "killed"  # the container we killed: 137


@dataclasses.dataclass
class Context:
    image: str
    workdir: Path
    mnist: Path  # synth-data mnist output: train/ and test/
    shards: Path  # per-rank RecordIO shards train_0, train_1
    launcher: str = "ours"  # ours | toolkit
    saved_checkpoint: dict = dataclasses.field(default_factory=dict)  # disk-full scenario: name -> sha256


@dataclasses.dataclass
class Scenario:
    name: str
    expected: str  # one line for the report
    build: Callable[[Context], JobSpec]
    exits: tuple  # per host: int, NONZERO or KILLED
    failure: str | None = None  # regex the master's failure file's first line must match
    worker_failure: str | None = None  # same for algo-2
    fault: str = "start"  # start | injected | rank: where the fault time comes from
    max_seconds: float = 60.0  # fault to last exit
    check: Callable[[Context, object], list] | None = None  # extra checks: returns problems
    toolkit: bool = True  # does the scenario apply to the toolkit's runner
    # Its verdict needs CPU time to spare (pytest mark `alone`: make test runs it by itself): a watch that must not
    # fire while the work goes at the CPU's pace, or max_seconds less than about 5 times the CPU-bound part of the
    # seconds measured on an idle machine (the part beyond the launcher's timeout: docs/faults.md's table).
    alone: bool = False


@dataclasses.dataclass
class Observation:
    scenario: str
    launcher: str
    expected: str
    exits: list
    failure: str  # master's first failure line ("" when none)
    seconds: float | None  # fault to last exit; None when a host never exited
    problems: list
    harness_error: str | None = None  # the harness itself failed: the scenario was not observed

    @property
    def passed(self) -> bool:
        return not self.problems and self.harness_error is None

    @property
    def result(self) -> str:
        return "ERROR" if self.harness_error is not None else "pass" if self.passed else "FAIL"

    @property
    def observed(self) -> str:
        if self.harness_error is not None:
            return f"harness error: {self.harness_error}"
        codes = "/".join("-" if c is None else str(c) for c in self.exits)
        return f"exit {codes}" + (f"; {self.failure}" if self.failure else "; no failure file")


def harness_error_observation(scenario: Scenario, launcher: str, error: BaseException) -> Observation:
    """The Observation of a scenario whose harness failed (the job could not be built, run or judged): it
    counts, and shows, as not as expected."""
    text = f"{type(error).__name__}: {first_line(str(error))}"
    return Observation(scenario.name, launcher, scenario.expected, [], "", None, [text], harness_error=text)


def summary(observations: list) -> str:
    """'N/M as expected', and how many of the M the harness could not observe."""
    errors = sum(o.harness_error is not None for o in observations)
    return (f"{sum(o.passed for o in observations)}/{len(observations)} as expected"
            + (f", {errors} harness error{'s' if errors > 1 else ''}" if errors else ""))


# Running and judging.


def first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def fault_time(scenario: Scenario, result) -> float | None:
    if scenario.fault == "injected":
        return result.fault_at
    if scenario.fault == "rank":
        marks = [float(p.read_text()) for h in result.hosts for p in (h.root / "output" / "data").glob("fault-at")]
        return min(marks) if marks else None
    starts = [h.started_at for h in result.hosts if h.started_at]
    return min(starts) if starts else None


def judge(scenario: Scenario, ctx: Context, result) -> Observation:
    problems = []
    if result.during_error:
        problems.append(f"fault injection failed: {result.during_error}")
    for host, expected in zip(result.hosts, scenario.exits, strict=True):
        code = host.exit_code
        if expected is None:
            continue  # the host never ran
        if code is None:
            stuck = host.stuck_in()
            problems.append(f"{host.name} still running after {JOB_TIMEOUT_S:.0f} s" + (f": {stuck}" if stuck else ""))
        elif expected == NONZERO and code == 0:
            problems.append(f"{host.name} exited 0 (expected non-zero)")
        elif expected == KILLED and code != 137:
            problems.append(f"{host.name} exited {code} (expected 137, killed)")
        elif isinstance(expected, int) and code != expected:
            problems.append(f"{host.name} exited {code} (expected {expected})")
    master_line = first_line(result.master.failure)
    if scenario.failure and not re.search(scenario.failure, master_line):
        problems.append(f"master failure line {master_line!r} does not match {scenario.failure!r}")
    if scenario.worker_failure:
        worker_line = first_line(result.hosts[1].failure)
        if not re.search(scenario.worker_failure, worker_line):
            problems.append(f"worker failure line {worker_line!r} does not match {scenario.worker_failure!r}")
    if scenario.exits == (0, 0) and any(h.failure for h in result.hosts):
        problems.append("a failure file was written by a successful job")
    started = fault_time(scenario, result)
    ends = [h.finished_at for h in result.hosts if h.finished_at]
    seconds = None
    if started is None:
        problems.append("the fault's time is unknown (the fault never happened?)")
    elif ends and all(h.exit_code is not None for h, e in zip(result.hosts, scenario.exits, strict=True)
                      if e is not None):
        seconds = max(ends) - started
        if seconds > scenario.max_seconds:
            problems.append(f"{seconds:.1f} s from fault to exit (limit {scenario.max_seconds:.0f} s)")
    if scenario.check:
        problems += scenario.check(ctx, result)
    # The master's cause; when the master itself was the casualty, the worker's.
    shown = master_line or (f"algo-2: {first_line(result.hosts[1].failure)}" if result.hosts[1].failure else "")
    return Observation(scenario.name, ctx.launcher, scenario.expected, result.exit_codes, shown, seconds, problems)


def run_scenario(scenario: Scenario, ctx: Context, ssh_dir: Path | None = None) -> tuple[Observation, object]:
    spec = scenario.build(ctx)
    if ctx.launcher == "toolkit":
        spec = as_toolkit_job(spec, ssh_dir)
    result = run_job(spec, ctx.workdir / "job")
    return judge(scenario, ctx, result), result


def make_mnist_data(image: str, root: Path) -> tuple[Path, Path]:
    """Small synthetic MNIST from the image's own data tool, and 2 per-rank RecordIO shards."""
    script = ("synth-data mnist /data/mnist --train 2000 --test 500 && "
              "synth-data shard /data/mnist/train /data/shards --shards 2 --format recordio")
    subprocess.run([DOCKER, "run", "--rm", "-v", f"{root}:/data", "--entrypoint", "sh", image, "-c", script],
                   check=True, capture_output=True)
    return root / "mnist", root / "shards"


def format_report(observations: list, title: str) -> str:
    rows = [("scenario", "expected", "observed", "s to exit", "result")]
    for o in observations:
        observed = o.observed if len(o.observed) <= 90 else o.observed[:87] + "..."
        rows.append((o.scenario, o.expected, observed, "-" if o.seconds is None else f"{o.seconds:.1f}", o.result))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [title]
    for i, row in enumerate(rows):
        lines.append("| " + " | ".join(cell.ljust(widths[j]) for j, cell in enumerate(row)) + " |")
        if i == 0:
            lines.append("| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)

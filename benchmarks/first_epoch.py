#!/usr/bin/env python3
"""Where the first epoch's extra time goes: the built-in MNIST at `make demo`'s settings, configurations side by side.

    python3 -m benchmarks.first_epoch --image sagemaker-mxnet-horovod:cpu [--epochs 4] [--repeat 2] [--dissect]
        [--baseline-image OLD_IMAGE] [--json X.json [--chart X.png [--redraw]]]

Every run is `make demo`'s job (scripts/demo.py): 2 hosts (containers on this machine), 1 rank each, synthetic
MNIST from the image's `synth-data` (6,000 training samples per epoch), batch 64. The program is the image's
built-in MNIST run through benchmarks/probes/first_epoch_probe/first_steps.py, which only adds timestamps (the phases
of the start, every training step). Configurations, alternating within each round:

  defaults              the job as `make demo` runs it: local_job writes SDK local mode's instance type, and the
                        launcher sets OMP_NUM_THREADS = the machine's cores / all the ranks of the hosts sharing it
                        (before the thread rule, with --baseline-image: each host's cores / its own ranks)
  OMP_NUM_THREADS=1     the same, with OMP_NUM_THREADS=1 in the job's environment (the user's value wins): what
                        the rule sets on this 2-core machine, as a control
  OMP_NUM_THREADS=2     2 threads per rank set by the user: what the launcher set on this 2-core machine before
                        its thread rule (each host's cores / its own ranks), the slow first epoch's cause, as a
                        control that still shows it
  cpusets               each container pinned to its own core (docker --cpuset-cpus): the launcher counts 1 core
  baseline: ...         with --baseline-image, the first two configurations on that image (the launcher and
                        programs before a change), to measure a change side by side

Printed per configuration (medians over rounds): every epoch's seconds (the program's own epoch time), the
first/steady ratio (steady = median of epochs 2..N), the start's phases on rank 0, and epoch 1's steps against
epoch 2's: step 1, steps 2-5, the rest, the last step (the partial batch). --dissect adds one run per
configuration in which the first 3 steps of every epoch wait for the engine after the forward pass, after
backward and after the allreduce + update (FIRST_STEPS_SYNC), with oneDNN's verbose log on (DNNL_VERBOSE=2):
each part of step 1 against step 3, and oneDNN's primitive creation and execution time per step.

--json writes every run's records (epoch seconds, the start's phases, step times) and what they ran under; --chart
draws each configuration's epoch seconds by epoch index from it as a PNG (matplotlib: requirements-charts.txt),
--redraw from the JSON alone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import charts
from benchmarks.common.machine import load
from benchmarks.common.probed_runs import PROBE_DIR, PROBE_ENV, phases, run_probed
from scripts.local_job import DOCKER, Channel, JobSpec

CONFIGURATIONS = {  # name -> (environment, mpirun options, cpusets)
    "defaults": ({}, "", {}),
    "OMP_NUM_THREADS=1": ({"OMP_NUM_THREADS": "1"}, "", {}),
    # Control: the oversubscription the thread rule removed (2 threads per rank, 2 ranks on 2 shared cores).
    "OMP_NUM_THREADS=2": ({"OMP_NUM_THREADS": "2"}, "", {}),
    "cpusets": ({}, "", {"algo-1": "0", "algo-2": "1"}),
    # Diagnostic: OpenMP's idle threads sleep at once instead of spinning (libgomp's OMP_WAIT_POLICY).
    "passive OpenMP": ({}, "-x OMP_WAIT_POLICY=PASSIVE", {}),
    # Diagnostic: libgomp's spin count once it manages more threads than it sees CPUs (its "throttled" count).
    "throttled spin": ({}, "-x GOMP_SPINCOUNT=100", {}),
}
DEFAULT_CONFIGURATIONS = ("defaults", "OMP_NUM_THREADS=1", "cpusets")
SYNC_STEPS = 3
PHASES = ("python", "program imports", "read data", "import mxnet", "horovod init", "build + first forward",
          "resume check", "broadcast", "to epoch 1 start")
# oneDNN's verbose lines, after mpirun's --tag-output prefix: "[1,0]<stdout>:dnnl_verbose,create:cache_miss,...,0.09"
DNNL_LINE = re.compile(r"^\[1,(\d+)\]<stdout>:dnnl_verbose,(create:cache_miss|create:cache_hit|exec),.*,([0-9.]+)$")
MARKER_LINE = re.compile(r"^\[1,(\d+)\]<stdout>:first-steps: (?:epoch (\d+) )?step (\d+) (\w+)$")


def job_spec(image: str, data: Path, epochs: int, config: tuple, dissect: bool, during) -> JobSpec:
    env, mpi_options, cpusets = config
    hps = {"sagemaker_program": "first_steps.py", "sagemaker_submit_directory": "/opt/ml/code",
           "epochs": str(epochs), "batch-size": "64"}
    if dissect:
        # -x: the worker host's rank gets only the variables mpirun exports.
        mpi_options += f" -x FIRST_STEPS_SYNC={SYNC_STEPS} -x DNNL_VERBOSE=2"
    if mpi_options.strip():
        hps["sagemaker_mpi_custom_mpi_options"] = mpi_options.strip()
    return JobSpec(image=image, hosts=2, hyperparameters=hps, env={**env, **PROBE_ENV}, cpusets=cpusets, code_dir=PROBE_DIR,
                   channels=[Channel("train", data / "train"), Channel("test", data / "test")], timeout_s=1200,
                   during=during)


def run(name: str, image: str, data: Path, workdir: Path, args, dissect: bool = False) -> dict:
    configuration = CONFIGURATIONS[name.removeprefix("baseline: ")]
    result, records, sampler = run_probed(
        lambda during: job_spec(image, data, args.epochs, configuration, dissect, during), workdir, name)
    history = json.loads((result.master.root / "model" / "metrics.json").read_text())["history"]
    omp = re.search(r"OMP_NUM_THREADS=(\S+) \(([^)]*)\)", result.master.logs)
    epochs = records[0]["epochs"]
    other = [sampler.other_cpu_per_second(e["start"], e["end"]) for e in epochs]
    return {"records": records, "epoch_seconds": [h["seconds"] for h in history], "other_cpu": other,
            "omp": f"{omp[1]} ({omp[2]})" if omp else "?", "logs": result.master.logs + "\n" + result.hosts[1].logs}


def step_seconds(epoch: dict) -> list:
    times = [epoch["start"], *epoch["steps"]]
    return [b - a for a, b in zip(times, times[1:])]


def step_groups(epoch: dict) -> dict:
    steps = step_seconds(epoch)
    return {"step 1": steps[0], "steps 2-5": sum(steps[1:5]), "steps 6..N-1": sum(steps[5:-1]),
            "last step": steps[-1], "after the last step": epoch["end"] - epoch["steps"][-1]}


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def dnnl_per_step(logs: str) -> dict:
    """{(rank, epoch, step): [creation ms, execution ms]} from oneDNN's verbose lines between the probe's markers,
    and {(rank, "whole run"): ...} over all of them."""
    totals: dict = {}
    where: dict = {}  # rank -> (epoch, step) being run
    for line in logs.splitlines():
        marker = MARKER_LINE.match(line)
        if marker:
            rank, epoch, step, part = marker.groups()
            epoch = int(epoch) if epoch else where.get(rank, (1, None))[0]
            step = int(step)
            if part == "end":  # the next step's forward pass follows, or the steps run undisturbed from here
                step = step + 1 if step < SYNC_STEPS else None
            where[rank] = (epoch, step)
            continue
        found = DNNL_LINE.match(line)
        if found:
            whole = totals.setdefault((int(found[1]), "whole run"), [0.0, 0.0])
            whole[0 if found[2].startswith("create") else 1] += float(found[3])
        if found and where.get(found[1], (1, None))[1] is not None:
            cell = totals.setdefault((int(found[1]), *where[found[1]]), [0.0, 0.0])
            cell[0 if found[2].startswith("create") else 1] += float(found[3])
    return totals


def print_dissection(name: str, result: dict) -> None:
    record = result["records"][0]
    by_step = {(s["epoch"], s["step"]): s for s in record["sync"]}
    dnnl = dnnl_per_step(result["logs"])
    print(f"\n{name}, dissected (rank 0; OMP_NUM_THREADS={result['omp']}): the first {SYNC_STEPS} steps of epochs 1 "
          "and 2, each part waited for")
    print(f"{'epoch/step':>10s} {'forward s':>10s} {'backward s':>11s} {'allreduce+update s':>19s} "
          f"{'oneDNN create ms':>17s} {'oneDNN exec ms':>15s}")
    for epoch in (0, 1):
        for step in range(1, SYNC_STEPS + 1):
            part = by_step.get((epoch, step))
            if not part:
                continue
            create, execute = dnnl.get((0, epoch + 1, step), [0.0, 0.0])
            print(f"{epoch + 1:>5d}/{step:<4d} {part['forward']:10.3f} {part['backward']:11.3f} "
                  f"{part['allreduce_update']:19.3f} {create:17.1f} {execute:15.1f}")
    create, execute = dnnl.get((0, "whole run"), [0.0, 0.0])
    print(f"oneDNN on rank 0 over the whole run (setup, {SYNC_STEPS} dissected steps per epoch, the rest, validation): "
          f"primitive creation {create:.1f} ms, execution {execute:.1f} ms")


def write_record(args, runs: dict, dissected: dict, load_start: str) -> None:
    """Every run's records and what they ran under (not the containers' logs): what --chart draws."""
    def lean(result: dict) -> dict:
        return {key: value for key, value in result.items() if key != "logs"}

    record = {"image": args.image, "baseline_image": args.baseline_image, "epochs": args.epochs,
              "repeat": args.repeat, "cores": len(os.sched_getaffinity(0)), "load_start": load_start,
              "load_end": load(), "runs": {name: [lean(r) for r in results] for name, results in runs.items()},
              "dissected": {name: lean(result) for name, result in dissected.items()}}
    args.json.write_text(json.dumps(record, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--baseline-image", help="also run 'defaults' and 'OMP_NUM_THREADS=1' on this image")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2, help="rounds; configurations alternate within each")
    parser.add_argument("--configs", nargs="+", default=list(DEFAULT_CONFIGURATIONS), choices=list(CONFIGURATIONS))
    parser.add_argument("--dissect", action="store_true", help="one more run per configuration, dissected")
    charts.add_options(parser, "also write every run's records (phases, step times) to this file",
                       "each configuration's epoch seconds by epoch")
    args = parser.parse_args()
    if charts.redraw_only(parser, args, charts.first_epoch):
        return 0
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (a first and a steady epoch)")

    names = list(args.configs)
    if args.baseline_image:
        names += [f"baseline: {n}" for n in args.configs if n != "cpusets"]
    runs: dict = {name: [] for name in names}
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="first-epoch-") as tmp:
        tmp = Path(tmp)
        # The demo's data set: synth-data's defaults (6,000 training and 1,000 test samples).
        subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp}:/data", "--entrypoint", "synth-data", args.image,
                        "mnist", "/data/mnist"], check=True, stdout=subprocess.DEVNULL)
        data = tmp / "mnist"
        for round_ in range(args.repeat):
            for index, name in enumerate(names):
                image = args.baseline_image if name.startswith("baseline: ") else args.image
                before = load()
                result = run(name, image, data, tmp / f"run-{round_}-{index}", args)
                runs[name].append(result)
                seconds = result["epoch_seconds"]
                other = " ".join("-" if x is None else f"{x:.2f}" for x in result["other_cpu"])
                print(f"round {round_ + 1} {name:30s} epochs {' '.join(f'{s:.2f}' for s in seconds)} s, "
                      f"first/steady {seconds[0] / statistics.median(seconds[1:]):.2f}; other processes' CPU-s/s "
                      f"during each epoch {other} (load before {before}, after {load()})", flush=True)
        dissected = {name: run(name, args.baseline_image if name.startswith("baseline: ") else args.image, data,
                               tmp / f"dissect-{index}", args, dissect=True)
                     for index, name in enumerate(names)} if args.dissect else {}

    print(f"\nFirst epoch vs steady epochs: built-in MNIST, 2 hosts x 1 rank on this machine's "
          f"{len(os.sched_getaffinity(0))} cores, 6000 samples/epoch, batch 64, {args.epochs} epochs x {args.repeat} "
          f"rounds; image {args.image}; load average before {load_before}, after {load()}")
    print("(other CPU: CPU-s per second that processes outside the job's containers took, max over the run's epochs)")
    print(f"{'configuration':30s} {'OMP_NUM_THREADS (launcher note)':40s} {'epochs, s (median of rounds)':>30s} "
          f"{'first/steady (each round)':>27s} {'other CPU':>10s}")
    for name, results in runs.items():
        epochs = [median(r["epoch_seconds"][e] for r in results) for e in range(args.epochs)]
        ratios = [r["epoch_seconds"][0] / statistics.median(r["epoch_seconds"][1:]) for r in results]
        other = max((x for r in results for x in r["other_cpu"] if x is not None), default=None)
        print(f"{name:30s} {results[0]['omp'][:40]:40s} {' '.join(f'{s:.2f}' for s in epochs):>30s} "
              f"{statistics.median(ratios):6.2f} ({', '.join(f'{x:.2f}' for x in ratios)})".ljust(132)
              + ("-" if other is None else f"{other:.2f}"))

    print("\nThe start's phases, rank 0 / rank 1, seconds (median of rounds):")
    print(f"{'phase':24s}" + "".join(f"{name[:22]:>24s}" for name in runs))
    for phase in PHASES:
        cells = []
        for results in runs.values():
            values = [median(phases(r["records"][rank]).get(phase) for r in results) for rank in (0, 1)]
            cells.append("/".join("-" if v is None else f"{v:.2f}" for v in values))
        print(f"{phase:24s}" + "".join(f"{c:>24s}" for c in cells))

    print("\nEpoch 1's steps vs epoch 2's, rank 0, seconds (median of rounds), epoch 1 / epoch 2:")
    print(f"{'steps':24s}" + "".join(f"{name[:22]:>24s}" for name in runs))
    for group in ("step 1", "steps 2-5", "steps 6..N-1", "last step", "after the last step"):
        cells = []
        for results in runs.values():
            first = median(step_groups(r["records"][0]["epochs"][0])[group] for r in results)
            second = median(step_groups(r["records"][0]["epochs"][1])[group] for r in results)
            cells.append(f"{first:.3f} / {second:.3f}")
        print(f"{group:24s}" + "".join(f"{c:>24s}" for c in cells))
    for name, result in dissected.items():
        print_dissection(name, result)
    if args.json:
        write_record(args, runs, dissected, load_before)
        if args.chart:
            charts.first_epoch(args.json, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())

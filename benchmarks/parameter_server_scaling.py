#!/usr/bin/env python3
"""Horovod against MXNet's parameter server, in miniature: AWS's Horovod-for-MXNet comparison (one server, one
server per worker, two servers per worker) on this machine, in one run, as ratios.

Every worker gets the same CPU in every layout (docker --cpuset-cpus, --cpus, OMP_NUM_THREADS=1): at 2 workers
one core each (one host each, cores 0 and 1); at 4 workers half a core each (two hosts per core, --cpus 0.5).
The scheduler and the servers run in the workers' containers and share their CPU, as they share a host's cores
on SageMaker. Layouts, alternating within each round so that a change in the machine's load hits all alike:

  alone          one worker by itself (a single process, no distribution), with one worker's CPU
  horovod        N hosts x 1 rank, Horovod over MPI (the image's default)
  ps 1 server    N hosts x 1 worker, one server (beside the scheduler, on the first host)
  ps 1:1         N hosts x 1 worker, N servers (one per host: AWS's MXNet toolkit's layout)
  ps 2:1         N hosts x 1 worker, 2N servers (two per host)
  control        N independent single-process jobs at once, each with one worker's CPU

With --cpu (MNIST only), where the workers' CPU went in the steady epochs (from rank 0's first epoch line on):
CPU ms per worker-step (one worker's batch), sampled from /proc as horovod_tuning.py samples it, by thread (the
MXNet engine's busiest thread, Python's main thread, the worker's other threads: Horovod's background thread, or
ps-lite's and ZeroMQ's) and by process (the servers and the scheduler, Open MPI's daemons, the launcher and
sshd); not for the control, whose jobs end their first epochs apart.

Efficiency = throughput / (N x alone) (Horovod's definition) and / control (what N busy workers can do on this
machine at all). The built-in programs' kvstore hyperparameter switches them between Horovod (kvstore horovod)
and the parameter servers (kvstore dist_sync: the servers sum the gradients, each worker applies them).
Throughput: MNIST's global samples/s of the steady epochs (the first left out), Faster R-CNN's (ResNet-50 backbone,
random weights, synthetic COCO, short side --short, 192 by default) global images/s of iterations 2..N from rank
0's log lines. Faster R-CNN is the compute-heavier model, and its ResNet-50 backbone has far more parameters to
exchange every step than MNIST's small CNN. At a short side of 320 one worker alone on a core trained 0.05
images/s here, too slow for a run of every layout; a short side of 192 keeps every parameter (so every step's
communication) and cuts the pixels to about a third of 320's (a 17th of the training size's 800). Smaller fails:
the RPN keeps 2000 proposals in training, more than a 128-pixel image has anchors.

  python3 -m benchmarks.parameter_server_scaling [--image sagemaker-mxnet-horovod:cpu] [--models mnist faster_rcnn]
      [--workers 2 4] [--repeat 1] [--data path/to/mnist] [--train 6000] [--epochs 3] [--iterations 4]
      [--short 192] [--cpu] [--json X.json [--chart X.png [--redraw]]]

--json writes every round's throughput by model, worker count and layout, and what it ran under; --chart draws
the efficiency of each layout against the worker (= host) count from it as a PNG, linear = 1.0 as the reference
(matplotlib: requirements-charts.txt); --redraw from the JSON alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from benchmarks.common import charts
from benchmarks.common.machine import load
from benchmarks.common.rank_cpu import CpuSampler, per_rank_step
from benchmarks.common.scaling_jobs import efficiency, placement, prepare_data, steady_rate
from scripts.local_job import DOCKER, Channel, JobSpec, run_job

MNIST_BATCH = 64  # per worker
LAYOUTS = ("alone", "horovod", "ps 1 server", "ps 1:1", "ps 2:1", "control")
SERVERS = {"ps 1 server": lambda n: 1, "ps 1:1": lambda n: n, "ps 2:1": lambda n: 2 * n}
# CPU columns: the sampler's roles, Horovod's thread (found by its cycle sleep) counted with the other threads of
# the worker: Horovod's or ps-lite's and ZeroMQ's, whichever the layout has.
CPU_COLUMNS = {"engine": ("engine",), "main": ("main",), "other threads": ("horovod", "other threads"),
               "servers+scheduler": ("servers+scheduler",), "MPI daemons": ("orted", "mpirun"),
               "launcher+sshd": ("launcher+sshd",)}


def program_hps(model: str, args) -> tuple[dict, list]:
    data = args.data_dir
    if model == "faster_rcnn":
        hps = {"sagemaker_program": "faster_rcnn", "batch-size": "1", "short": str(args.short),
               "max-size": str(2 * args.short), "pretrained-base": "false",
               "num-workers": "0", "epochs": "1", "max-iterations-per-epoch": str(args.iterations),
               "log-interval": "1", "lr-warmup": "0", "resume": "false", "tensorboard": "false"}
        return hps, [Channel("train", data["faster_rcnn"])]
    hps = {"sagemaker_program": "mnist", "epochs": str(args.epochs), "batch-size": str(MNIST_BATCH), "log-interval": "0",
           "save-checkpoints": "false", "tensorboard": "false"}
    return hps, [Channel("train", data["mnist"] / "train"), Channel("test", data["mnist"] / "test")]


def spec(model: str, layout: str, workers: int, args, host_index: int = 0) -> JobSpec:
    """The job of a layout; for alone and each control job, one host placed like worker `host_index`."""
    hps, channels = program_hps(model, args)
    cpusets, cpus = placement(workers)
    if layout in ("alone", "control"):
        source = f"algo-{host_index + 1}"
        return JobSpec(image=args.image, hosts=1, hyperparameters=hps, channels=channels, timeout_s=3600,
                       env={"OMP_NUM_THREADS": "1"}, cpusets={"algo-1": cpusets[source]},
                       cpus={"algo-1": cpus[source]} if cpus else {})
    if layout != "horovod":
        hps = {**hps, "kvstore": "dist_sync", "sagemaker_parameter_server_num_servers": str(SERVERS[layout](workers))}
    return JobSpec(image=args.image, hosts=workers, hyperparameters=hps, channels=channels, timeout_s=3600,
                   env={"OMP_NUM_THREADS": "1"}, cpusets=cpusets, cpus=cpus)


def throughput(model: str, layout: str, workers: int, args, workdir: Path) -> tuple[float, dict | None]:
    """The layout's throughput and, with --cpu (MNIST), its CPU ms per worker-step by thread or process."""
    if layout == "control":
        specs = [spec(model, layout, workers, args, index) for index in range(workers)]
    else:
        specs = [spec(model, layout, workers, args)]
    results: dict = {}

    def one(index: int) -> None:
        results[index] = run_job(specs[index], workdir / f"job-{index}" if len(specs) > 1 else workdir)

    sample = args.cpu and model == "mnist" and layout != "control"  # the jobs' first epochs end apart
    with CpuSampler(start_when=lambda: first_epochs_done(workdir, len(specs))) if sample \
            else contextlib.nullcontext() as sampler:
        threads = [threading.Thread(target=one, args=(index,)) for index in range(len(specs))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    rate = sum(steady_rate(results[index], f"{model} {layout} x{workers} job {index}") for index in results)
    if not sample:
        return rate, None
    if not sampler.started:
        sys.exit(f"benchmark: {model} {layout} x{workers}: no first epoch's line seen in rank 0's log")
    steady = [epoch for result in results.values()  # the epochs after the first, as the sampler counted them
              for epoch in json.loads((result.master.root / "model" / "metrics.json").read_text())["history"][1:]]
    return rate, per_rank_step(sampler.seconds_by_role(), steady, MNIST_BATCH)


def first_epochs_done(workdir: Path, jobs: int) -> bool:
    """Rank 0 of each job has logged MNIST's first epoch (its line comes after the epoch's validation)."""
    logs = workdir.glob("**/output/data/logs/*-rank-0.log")
    return sum("epoch=1 train_loss=" in log.read_text(errors="replace") for log in logs) >= jobs


def report(rates: dict, cpu: dict, args) -> None:
    print()
    print(f"Horovod vs parameter server in {args.image}: {args.repeat} round(s), medians; MNIST {args.epochs} "
          f"epochs of {args.train} samples, batch {MNIST_BATCH} per worker; Faster R-CNN {args.iterations} iterations (the "
          f"first not timed), batch 1, short side {args.short}; load average at the end {load()}")
    print(f"{'model':12s} {'workers':>7s} {'layout':12s} {'throughput':>11s} {'vs N x alone':>13s} {'vs control':>11s}")
    for model in args.models:
        for workers in args.workers:
            alone = statistics.median(rates[(model, workers, "alone")])
            control = statistics.median(rates[(model, workers, "control")])
            for layout in LAYOUTS:
                rate = statistics.median(rates[(model, workers, layout)])
                scaled = "-" if layout == "alone" else f"{efficiency(rate, workers, alone):.2f}"
                versus = "-" if layout in ("alone", "control") else f"{rate / control:.2f}"
                print(f"{model:12s} {workers:7d} {layout:12s} {rate:11.3f} {scaled:>13s} {versus:>11s}")
    if not cpu:
        return
    print(f"\nCPU ms per worker-step (one worker's batch of {MNIST_BATCH}) after the first epoch, medians, by thread "
          "or process:")
    print(f"{'workers':>7s} {'layout':12s} " + " ".join(f"{column:>17s}" for column in CPU_COLUMNS))
    for (_model, workers, layout), samples in cpu.items():
        per_column = [statistics.median(sum(sample.get(role, 0.0) for role in roles) for sample in samples)
                      for roles in CPU_COLUMNS.values()]
        print(f"{workers:7d} {layout:12s} " + " ".join(f"{ms:17.1f}" for ms in per_column))


def write_record(args, rates: dict, load_start: str) -> None:
    """Every round's throughput, model -> workers -> layout -> [per round], and what it ran under: what --chart
    draws."""
    record = {"image": args.image, "models": args.models, "workers": args.workers, "repeat": args.repeat,
              "mnist": {"train": args.train, "epochs": args.epochs, "batch_per_worker": MNIST_BATCH},
              "faster_rcnn": {"iterations": args.iterations, "short": args.short},
              "cores": len(os.sched_getaffinity(0)), "load_start": load_start, "load_end": load(),
              "rates": {model: {str(workers): {layout: rates.get((model, workers, layout), []) for layout in LAYOUTS}
                                for workers in args.workers} for model in args.models}}
    args.json.write_text(json.dumps(record, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--models", nargs="+", choices=["mnist", "faster_rcnn"], default=["mnist", "faster_rcnn"])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeat", type=int, default=1, help="rounds; layouts alternate within each")
    parser.add_argument("--data", type=Path, help="real MNIST (train/, test/ with images.gz, labels.gz): its "
                        "first --train digits; default: synthetic digits")
    parser.add_argument("--train", type=int, default=6000, help="MNIST training samples")
    parser.add_argument("--epochs", type=int, default=3, help="MNIST epochs (the first not timed)")
    parser.add_argument("--iterations", type=int, default=4, help="Faster R-CNN iterations (the first not timed)")
    parser.add_argument("--short", type=int, default=192, help="Faster R-CNN's image short side (training: 800)")
    parser.add_argument("--cpu", action="store_true", help="MNIST: where the workers' CPU went (sampled from /proc)")
    charts.add_options(parser, "write every round's throughput here",
                       "each layout's efficiency by worker count")
    args = parser.parse_args()
    if charts.redraw_only(parser, args, charts.scaling_efficiency):
        return 0
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("benchmark: needs at least 2 cores")
    for workers in args.workers:
        placement(workers)

    rates: dict = {}  # (model, workers, layout) -> [throughput]
    load_start = load()
    cpu: dict = {}  # (model, workers, layout) -> [CPU ms per worker-step by role]
    with tempfile.TemporaryDirectory(prefix="ps-scaling-") as tmp:
        tmp = Path(tmp)
        args.data_dir = {}
        if "mnist" in args.models:
            args.data_dir["mnist"] = prepare_data(argparse.Namespace(**{**vars(args), "model": "mnist"}), tmp)
        if "faster_rcnn" in args.models:  # enough images for every worker's iterations
            subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp}:/data", "--entrypoint", "synth-data", args.image,
                            "coco", "/data/coco", "--train", str(max(args.workers) * args.iterations), "--val", "0"],
                           check=True, stdout=subprocess.DEVNULL)
            args.data_dir["faster_rcnn"] = tmp / "coco"
        for round_ in range(args.repeat):
            for model in args.models:
                for workers in args.workers:
                    for index, layout in enumerate(LAYOUTS):
                        before = load()
                        rate, roles = throughput(model, layout, workers, args,
                                                 tmp / f"run-{round_}-{model}-{workers}-{index}")
                        rates.setdefault((model, workers, layout), []).append(rate)
                        if roles is not None:
                            cpu.setdefault((model, workers, layout), []).append(roles)
                        print(f"round {round_ + 1} {model:12s} {workers} workers {layout:12s} {rate:10.3f}/s "
                              f"(load before {before}, after {load()})", flush=True)
    report(rates, cpu, args)
    if args.json:
        write_record(args, rates, load_start)
        if args.chart:
            charts.scaling_efficiency(args.json, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())

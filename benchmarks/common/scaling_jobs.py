"""The jobs the scaling studies run (weak_scaling, horovod_tuning, parameter_server_scaling, link_scaling,
compression_accuracy): MNIST (or a few Faster R-CNN iterations) on 1 or 2 hosts pinned to this machine's cores, the
data they train on, their steady throughput, the control (two independent 1-rank jobs, one per core), and the
efficiency every scaling study reports."""

from __future__ import annotations

import gzip
import json
import re
import statistics
import subprocess
import sys
import threading
from pathlib import Path

from scripts.local_job import DOCKER, Channel, JobSpec, run_job

# name -> (hosts, ranks per host, cpuset per host)
CONFIGURATIONS = {
    "1 host x 1 rank": (1, 1, {"algo-1": "0"}),
    "2 hosts x 1 rank": (2, 1, {"algo-1": "0", "algo-2": "1"}),
    "1 host x 2 ranks": (1, 2, {"algo-1": "0,1"}),
}
CONTROL = "control: 2 x 1 rank, independent"


def efficiency(throughput: float, workers: int, alone: float) -> float:
    """Horovod's scaling efficiency: the throughput of N workers (or ranks) against N x one worker alone with the same
    resources; linear = 1.0."""
    return throughput / (workers * alone)


def real_subset(source: Path, target: Path, train: int) -> None:
    """The first `train` training digits (and the first 2000 test digits) of real MNIST IDX .gz files, as IDX .gz."""
    for part, count in (("train", train), ("test", 2000)):
        (target / part).mkdir(parents=True)
        for name, sample_bytes in (("images.gz", 28 * 28), ("labels.gz", 1)):
            raw = gzip.decompress((source / part / name).read_bytes())
            header = 16 if sample_bytes > 1 else 8
            total = int.from_bytes(raw[4:8], "big")
            keep = total if count is None else min(count, total)
            body = raw[header:header + keep * sample_bytes]
            (target / part / name).write_bytes(gzip.compress(raw[:4] + keep.to_bytes(4, "big") + raw[8:header] + body))


def job_spec(image: str, data: Path, batch: int, args, hosts: int, per_host: int, cpusets: dict) -> JobSpec:
    if getattr(args, "model", "mnist") == "faster_rcnn":
        # Few iterations of the whole model from random weights, no validation (the data has none).
        hps = {"sagemaker_program": "faster_rcnn", "batch-size": str(batch), "short": str(args.short),
               "pretrained-base": "false", "num-workers": "0", "epochs": "1",
               "max-iterations-per-epoch": str(args.iterations), "log-interval": "1", "lr-warmup": "0",
               "resume": "false", "tensorboard": "false"}
        channels = [Channel("train", data)]
    else:
        hps = {"sagemaker_program": "mnist", "epochs": str(args.epochs), "batch-size": str(batch),
               "log-interval": "0", "save-checkpoints": "false", "tensorboard": "false"}
        channels = [Channel("train", data / "train"), Channel("test", data / "test")]
    hps["sagemaker_mpi_num_of_processes_per_host"] = str(per_host)
    # One core per rank: one OpenMP thread each (the launcher's default is cores / ranks, which a cpuset of
    # two cores for one rank would double).
    return JobSpec(image=image, hosts=hosts, hyperparameters=hps, cpusets=cpusets, timeout_s=1800,
                   env={"OMP_NUM_THREADS": "1"}, channels=channels)


RCNN_ITERATION = re.compile(r"epoch=\d+ iter=(\d+) .* samples_per_sec=(\S+)")


def steady_rate(result, name: str) -> float:
    if any(code != 0 for code in result.exit_codes) or result.timed_out:
        sys.exit(f"benchmark: {name} failed:\n{result.describe()}")
    metrics = result.master.root / "model" / "metrics.json"
    history = json.loads(metrics.read_text()).get("history") if metrics.exists() else None
    if history is None:  # R-CNN (its metrics.json holds validation's): rank 0's per-iteration lines (images/s)
        rates = {int(m[1]): float(m[2]) for m in map(RCNN_ITERATION.search, result.master.logs.splitlines()) if m}
        return statistics.median(rate for iteration, rate in rates.items() if iteration >= 2)
    rates = [epoch["samples_per_sec"] for epoch in history]
    return statistics.median(rates[1:] or rates)


def run_configuration(name: str, image: str, data: Path, batch: int, workdir: Path, args) -> float:
    hosts, per_host, cpusets = CONFIGURATIONS[name]
    return steady_rate(run_job(job_spec(image, data, batch, args, hosts, per_host, cpusets), workdir), name)


def run_control(image: str, data: Path, batch: int, workdir: Path, args, keep_results: bool = False):
    """Two 1-rank jobs started together, one per core; their summed throughput (and the job results)."""
    results: dict = {}

    def one(core: str) -> None:
        spec = job_spec(image, data, batch, args, 1, 1, {"algo-1": core})
        results[core] = run_job(spec, workdir / f"core-{core}")

    threads = [threading.Thread(target=one, args=(core,)) for core in ("0", "1")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rate = sum(steady_rate(results[core], f"control on core {core}") for core in ("0", "1"))
    return (rate, list(results.values())) if keep_results else rate


def prepare_data(args, tmp: Path) -> Path:
    """MNIST for the runs under tmp: the first --train digits of --data, or synthetic digits; for R-CNN
    synthetic COCO images (enough for every rank's iterations)."""
    if getattr(args, "model", "mnist") == "faster_rcnn":
        subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp}:/data", "--entrypoint", "synth-data", args.image,
                        "coco", "/data/coco", "--train", str(2 * args.iterations), "--val", "0"],
                       check=True, stdout=subprocess.DEVNULL)
        return tmp / "coco"
    data = tmp / "mnist"
    if args.data:
        real_subset(args.data, data, args.train)
    else:
        subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp}:/data", "--entrypoint", "synth-data", args.image,
                        "mnist", "/data/mnist", "--train", str(args.train), "--test", "1000"],
                       check=True, stdout=subprocess.DEVNULL)
    return data


def placement(workers: int) -> tuple[dict, dict]:
    """Host -> cpuset and host -> --cpus for `workers` one-worker hosts: one core each at 2, half a core at 4."""
    hosts = [f"algo-{i + 1}" for i in range(workers)]
    if workers == 2:
        return {host: str(i) for i, host in enumerate(hosts)}, {}
    if workers == 4:
        return {host: str(i // 2) for i, host in enumerate(hosts)}, {host: "0.5" for host in hosts}
    raise SystemExit("benchmark: --workers takes 2 and 4 (what 2 cores can share evenly)")

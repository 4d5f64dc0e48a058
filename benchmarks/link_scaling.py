#!/usr/bin/env python3
"""Scaling where the network is the limit: a job trained through `train` on N local containers whose links are
shaped to a stated ratio (benchmarks/common/emulated_link.py): at ratio R the bytes each host sends in one step take
R x one step's compute, so the emulation does not depend on this machine's speed.

Workloads (benchmarks/common/link_workloads.py): `gpu-like` and `cpu`, the link probe (benchmarks/probes/link_probe: 25M
parameters, 100 MB of fp32 gradients a step) with a GPU host's compute emulated off the CPU (gradients over the
backward pass) or computed on the rank's core; `faster_rcnn-gpu-like` and `mask_rcnn-gpu-like`, the probe's
emulated GPU host with that network's layers (their parameters, and their shares of the compute by multiply-adds);
`faster_rcnn` and `mask_rcnn`, the built-in programs on a CPU host; and any user's Gluon script, unchanged
(`--script PATH[:key=value,...]`, timed from outside by benchmarks/probes/script_probe), or the grid of user-script
shapes (`--user-grid`: benchmarks/probes/user_scripts/layered_gluon.py, whose defaults are the script a user
reported). Each round runs, alternating so that a change
in the machine's load hits all alike:
  alone      1 host x 1 rank, unshaped: the step's compute (it sets every link's rate) and the throughput
             Horovod's efficiency divides by (throughput of N ranks / (N x one rank alone))
  control    (CPU workloads, --control) N independent 1-rank jobs at once: what N busy ranks get here at all
  N hosts    1 rank each, at every --ratios value (`unshaped`: the container network as it is), with every
             --variant (hyperparameters or environment a user would set)
Every rank gets the same CPU: one core each at 2 hosts, half a core each at 4 (two hosts per core, --cpus 0.5).
For the probe it also prints the overlap limit (the efficiency if each layer's bytes left when its gradient
existed and crossed the link back to back), and with --phases, per ratio, one more run of the first variant
with Horovod's timeline of 3 steps and every rank's CPU per thread (benchmarks/common/link_timeline.py; for a
script, the timeline of the whole run read without the script's help: link_timeline.tensor_steps).

  python3 -m benchmarks.link_scaling [--image sagemaker-mxnet-horovod:cpu] [--workloads gpu-like cpu]
      [--ratios unshaped 0.24 0.77] [--hosts 2] [--variant 'NAME:key=value,KEY=value'] [--repeat 1]
      [--script PATH[:key=value,...]] [--user-grid] [--phases] [--control] [--queue-ms 10]
      [--congestion-control cubic] [--cpu-shares 16384] [--keep DIR]

Variant keys in lower case are hyperparameters (the launcher's, e.g. horovod_fusion_threshold_mb, or the
program's: compression=fp16 for the probe), upper case the job's environment; link_congestion_control is the
script's own (that variant's links' TCP congestion control). Needs root, tc and nsenter.

TCP congestion control: the shaped hosts' namespaces use cubic, Linux's default, unless told. This machine's
kernel defaults to bbr, under which Open MPI's exchanges on a shaped link lost up to 0.13 of linear against
cubic (docs/benchmarks/link-scaling.md); raw TCP exchanges of the same sizes lost less (benchmarks/tcp_exchange.py).
A container's namespace can set only the algorithms of the kernel's net.ipv4.tcp_allowed_congestion_control (some
kernels list "reno bbr" only): the script refuses before any job starts, naming the sysctl that allows cubic.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import charts, link_timeline
from benchmarks.common import emulated_link as link
from benchmarks.common import link_workloads as workloads
from benchmarks.common.machine import load
from benchmarks.common.scaling_jobs import efficiency, placement
from scripts.local_job import DOCKER, run_job

DEFAULTS = "defaults:"
# The user-script grid (--user-grid): probes/user_scripts/layered_gluon.py's shapes; its defaults are the script a
# user reported (imperative_gluon_link.py: 12 Dense layers of 1440, a delay after each, batch 2, trainer.step)
LAYERED_GLUON = Path(__file__).resolve().parent / "probes" / "user_scripts" / "layered_gluon.py"
USER_GRID = ("", "hybridize=true", "layers=10,width=1581", "layers=50,width=707", "batch=16", "cpu_ms=1.5",
             "cpu_ms=5", "delay=before", "update=allreduce,sync=gradients")
TIMELINE_IN_JOB = "/opt/ml/output/data/horovod_timeline.json"
# A variant's key for the emulated link's TCP congestion control (the script's, not the job's: never passed on)
CONGESTION_CONTROL_KEY = "link_congestion_control"


def parse_variant(text: str) -> tuple[str, dict, dict]:
    name, _, spec = text.partition(":")
    hps, env = {}, {}
    for item in filter(None, spec.split(",")):
        key, _, value = item.partition("=")
        (env if key.isupper() else hps)[key] = value
    return name, hps, env


class Shaper:
    """JobSpec.during: shape every host's link as soon as its container runs, and remember when. With a flow
    cap (a share of the link's rate), also cap each TCP connection, classifying new ones until the job ends."""

    def __init__(self, hosts: int, rate_bps: float, queue_ms: float, flow_cap: float | None = None,
                 congestion_control: str | None = None):
        self.hosts, self.rate_bps, self.queue_ms, self.flow_cap = hosts, rate_bps, queue_ms, flow_cap
        self.congestion_control = congestion_control
        self.shaped_at, self.flows = 0.0, []

    def __call__(self, handle) -> None:
        names = [f"algo-{index + 1}" for index in range(self.hosts)]
        for name in names:
            pid = link.container_pid(DOCKER, handle.container(name, 60))
            if self.congestion_control:
                link.set_congestion_control(pid, self.congestion_control)
            if self.flow_cap:
                self.flows.append(link.FlowCapped(pid, self.rate_bps, self.flow_cap * self.rate_bps,
                                                  queue_ms=self.queue_ms))
            else:
                link.shape(pid, self.rate_bps, queue_ms=self.queue_ms)
        self.shaped_at = time.monotonic()  # CLOCK_MONOTONIC: the containers' clock too
        while self.flows and not all(name in handle.exited for name in names):
            for flows in self.flows:
                flows.classify_new()
            time.sleep(0.02)  # no event tells a new connection: poll, 50 times a second


def run(workload, args, hosts: int, cpusets: dict, cpus: dict, hps: dict, env: dict, workdir: Path,
        name: str, during=None, per_host: int = 1) -> dict:
    hps = {**hps, "sagemaker_mpi_num_of_processes_per_host": str(per_host)} if per_host > 1 else hps
    spec = workload.spec(hosts, hps, env={"OMP_NUM_THREADS": "1", **env}, cpusets=cpusets, cpus=cpus, during=during,
                         cpu_shares=args.cpu_shares)
    return workload.read(run_job(spec, workdir), name, hosts * per_host)


def run_alone(workload, args, workdir: Path) -> dict:
    """One rank with one rank's CPU: a host's share of its core, split between the host's ranks."""
    cpusets, cpus = placement(args.hosts)
    share = float(cpus.get("algo-1", 1)) / args.ranks_per_host
    return run(workload, args, 1, {"algo-1": cpusets["algo-1"]}, {"algo-1": f"{share:g}"} if share < 1 else {}, {},
               {}, workdir, "alone")


def run_control(workload, args, workdir: Path) -> float:
    cpusets, cpus = placement(args.hosts)
    rates: dict = {}

    def one(host: str) -> None:
        rates[host] = run(workload, args, 1, {"algo-1": cpusets[host]}, {"algo-1": cpus[host]} if cpus else {}, {},
                          {}, workdir / host, f"control {host}")["samples_per_s"]

    threads = [threading.Thread(target=one, args=(host,)) for host in cpusets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if len(rates) != len(cpusets):
        raise workloads.JobFailed("a control job failed")
    return sum(rates.values())


def run_linked(workload, args, rate_bps: float | None, hps: dict, env: dict, workdir: Path) -> dict:
    cpusets, cpus = placement(args.hosts)
    hps = dict(hps)
    congestion_control = hps.pop(CONGESTION_CONTROL_KEY, args.congestion_control)
    shaper = Shaper(args.hosts, rate_bps, args.queue_ms, args.flow_cap,
                    None if congestion_control == "system" else congestion_control) if rate_bps else None
    record = run(workload, args, args.hosts, cpusets, cpus, hps, env, workdir, "linked", shaper, args.ranks_per_host)
    if shaper and record["measured_from"] is not None and record["measured_from"] < shaper.shaped_at:
        raise workloads.JobFailed("the links were shaped only after the measured steps began: raise --warmup")
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--workloads", nargs="*", choices=["gpu-like", "cpu", "faster_rcnn", "mask_rcnn",
                                                           "faster_rcnn-gpu-like", "mask_rcnn-gpu-like"],
                        default=["gpu-like"])
    parser.add_argument("--ratios", nargs="+", default=["unshaped", "0.24", "0.77"],
                        help="link ratios (a host's bytes per step / link rate / compute per step), or unshaped")
    parser.add_argument("--script", action="append", default=[], metavar="PATH[:key=value,...]",
                        help="a user's Gluon training script as one more workload, unchanged (probes/script_probe "
                        "times its Trainer.step calls), with these hyperparameters; repeat for several")
    parser.add_argument("--user-grid", action="store_true", help="the grid of user-script shapes as workloads "
                        "(probes/user_scripts/layered_gluon.py: " + "; ".join(s or "as reported" for s in USER_GRID) + ")")
    parser.add_argument("--hosts", type=int, choices=[2, 4], default=2)
    parser.add_argument("--ranks-per-host", type=int, default=1, help="ranks sharing each host's CPU (Horovod's "
                        "hierarchical allreduce: the variant HOROVOD_HIERARCHICAL_ALLREDUCE=1)")
    parser.add_argument("--variant", action="append", help="NAME:key=value,KEY=value (default: the defaults); "
                        f"{CONGESTION_CONTROL_KEY}=ALGORITHM sets the link's for that variant")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--steps", type=int, default=24, help="probe: steps per run")
    parser.add_argument("--warmup", type=int, default=4, help="probe: steps left out of the figures")
    parser.add_argument("--step-ms", type=float, default=450.0,
                        help="probe, gpu-like: the emulated compute a step; long enough that every link is slower "
                             "than the containers' unshaped transport (~7.5 Gbit/s here): 900 for the R-CNN layouts")
    parser.add_argument("--iterations", type=int, default=4, help="R-CNN: iterations per run (the first untimed)")
    parser.add_argument("--short", type=int, default=320, help="R-CNN: image short side")
    parser.add_argument("--congestion-control", default="cubic",
                        help="TCP congestion control in the shaped hosts' namespaces: Linux's default, cubic, unless "
                             "told; 'system' keeps this machine's (bbr here, which costs Open MPI's exchanges "
                             "on these links: docs/benchmarks/link-scaling.md)")
    parser.add_argument("--queue-ms", type=float, default=link.QUEUE_MS, help="the emulated link's queue")
    parser.add_argument("--flow-cap", type=float, help="cap every TCP connection at this share of the link's rate "
                        "(EC2: 5 or 10 Gbit/s a flow, e.g. 0.4 of 25 Gbit/s)")
    parser.add_argument("--cpu-shares", type=int, default=0, help="docker --cpu-shares of every container (e.g. "
                        "16384: ahead of other work on a shared machine; on cgroup v1 raise Docker's own group's "
                        "cpu.shares too, or the host's processes still come first)")
    charts.add_options(parser, "write every run's efficiency and overlap limit here",
                       "efficiency against the link ratio, with the overlap limit and AWS's published points")
    parser.add_argument("--keep", type=Path, help="run the jobs under this directory and keep it (logs, timelines)")
    parser.add_argument("--phases", action="store_true", help="probe: per ratio, one more run with the timeline")
    parser.add_argument("--control", action="store_true", help="CPU workloads: N independent ranks at once too")
    args = parser.parse_args()
    if charts.redraw_only(parser, args, charts.link_sweep):
        return 0
    ratios = [None if r == "unshaped" else float(r) for r in args.ratios]
    variants = [parse_variant(v) for v in (args.variant or [DEFAULTS])]
    if any(ratios):
        algorithms = [hps.get(CONGESTION_CONTROL_KEY, args.congestion_control) for _, hps, _ in variants]
        try:
            link.require_tc()
            link.require_congestion_controls(a for a in algorithms if a != "system")
        except link.LinkError as error:
            sys.exit(f"link_scaling: {error} (--congestion-control system keeps the kernel's default instead)")

    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="link-scaling-") as tmp:
        tmp = args.keep or Path(tmp)
        chosen = [make_workload(name, args, tmp) for name in args.workloads]
        grid = [f"{LAYERED_GLUON}:{spec}" if spec else str(LAYERED_GLUON) for spec in USER_GRID] if args.user_grid else []
        chosen += [script_workload(text, args, tmp) for text in args.script + grid]
        for round_ in range(args.repeat):
            for workload in chosen:
                run_round(args, workload, ratios, variants, results, tmp / f"{workloads.file_name(workload.name)}-{round_}", round_)
        print_table(args, chosen, ratios, variants, results)
    if args.json:
        write_record(args, chosen, ratios, variants, results)
        if args.chart:
            charts.link_sweep(args.json, args.chart)
    return 0


def write_record(args, chosen: list, ratios: list, variants: list, results: dict) -> None:
    """Per workload: its alone steps, and per ratio (null: unshaped) each variant's efficiencies (one per round)
    and the overlap limits; with what the runs ran under."""
    record = {"image": args.image, "hosts": args.hosts, "repeat": args.repeat, "queue_ms": args.queue_ms,
              "congestion_control": args.congestion_control, "step_ms": args.step_ms, "load_end": load(),
              "workloads": {}}
    for workload in chosen:
        name = workload.name
        record["workloads"][name] = {
            "alone_step_s": [r["step_s"] for r in results.get((name, "alone"), [])],
            "ratios": [{"ratio": ratio, "limits": [x for x in results.get((name, ratio, "limit"), []) if x],
                        "variants": {v: results.get((name, ratio, v), []) for v, _, _ in variants}}
                       for ratio in ratios]}
    args.json.write_text(json.dumps(record, indent=1) + "\n")


def make_workload(name: str, args, tmp: Path):
    if name in ("gpu-like", "cpu"):
        return workloads.Probe(name, args)
    if name.endswith("-gpu-like"):
        return workloads.Probe("gpu-like", args, name.removesuffix("-gpu-like"), tmp)
    data = workloads.synthetic_coco(args.image, tmp, args.hosts * args.iterations)
    return workloads.Rcnn(name, args, data)


def script_workload(text: str, args, tmp: Path):
    path, _, spec = text.partition(":")
    script_args = parse_variant(":" + spec)[1]
    name = Path(path).stem + (f"[{spec}]" if spec else "")
    return workloads.Script(Path(path).resolve(), args, tmp, script_args, name)


def run_round(args, workload, ratios: list, variants: list, results: dict, workdir: Path, round_: int) -> None:
    name = workload.name
    alone = run_alone(workload, args, workdir / "alone")
    results.setdefault((name, "alone"), []).append(alone)
    one = alone["samples_per_s"]
    say(round_, name, "alone", f"{alone['step_s'] * 1000:7.1f} ms a step, {one:8.3f} samples/s")
    ranks = args.hosts * args.ranks_per_host
    if args.control and not name.endswith("gpu-like"):
        control = run_control(workload, args, workdir / "control")
        results.setdefault((name, "control"), []).append(efficiency(control, args.hosts, one))
        say(round_, name, "control", f"{control:8.3f} samples/s = {efficiency(control, args.hosts, one):.2f} of linear")
    per_host = link.ring_bytes_per_host(alone["gradient_bytes"], args.hosts)
    for ratio in ratios:
        rate = link.rate_for(ratio, per_host, alone["step_s"]) if ratio else None
        limit = link_timeline.overlap_limit(alone, rate, per_host) if "gradients_ready" in alone else None
        results.setdefault((name, ratio, "limit"), []).append(limit)
        for index, (variant, hps, env) in enumerate(variants):
            try:
                record = run_linked(workload, args, rate, hps, env, workdir / f"{ratio}-{index}")
            except workloads.JobFailed as error:
                say(round_, name, f"ratio {ratio or 'unshaped'} {variant}", f"FAILED: {str(error)[:800]}")
                continue
            scaled = efficiency(record["samples_per_s"], ranks, one)
            results.setdefault((name, ratio, variant), []).append(scaled)
            say(round_, name, f"ratio {ratio or 'unshaped'} {variant}",
                f"{record['step_s'] * 1000:7.1f} ms a step, {scaled:.2f} of linear"
                + (f" (link {rate / 1e6:.0f} Mbit/s" if rate else "") + (f", overlap limit {limit:.2f}" if limit else "")
                + (")" if rate else ""))
        if args.phases and "gradients_ready" in alone:
            run_phases(args, workload, ratio, rate, variants[0], results, workdir / f"{ratio}-phases", round_)
        elif args.phases and isinstance(workload, workloads.Script):
            run_script_phases(args, workload, ratio, rate, variants[0], workdir / f"{ratio}-phases", round_)


def run_phases(args, workload, ratio, rate, variant, results: dict, workdir: Path, round_: int) -> None:
    name, hps, env = variant
    record = run_linked(workload, args, rate, {**hps, "timeline": "true"}, env, workdir)
    timeline = workdir / "algo-1" / "output" / "data" / "link_probe_timeline.json"
    phases = link_timeline.summary(link_timeline.step_phases(record, link_timeline.read_timeline(timeline)))
    results.setdefault((workload.name, ratio, "phases"), []).append((phases, record["cpu_ms_per_step"]))
    say(round_, workload.name, f"ratio {ratio or 'unshaped'} phases ({name})", link_timeline.describe(phases, record))


def run_script_phases(args, workload, ratio, rate, variant, workdir: Path, round_: int) -> None:
    """A user's script: Horovod's timeline of the whole run (HOROVOD_TIMELINE), read without the script's help."""
    name, hps, env = variant
    record = run_linked(workload, args, rate, hps, {**env, "HOROVOD_TIMELINE": TIMELINE_IN_JOB}, workdir)
    events = link_timeline.read_timeline(workdir / "algo-1" / "output" / "data" / TIMELINE_IN_JOB.rsplit("/", 1)[1])
    steps = link_timeline.tensor_steps(events)[args.warmup:]
    say(round_, workload.name, f"ratio {ratio or 'unshaped'} phases ({name})",
        link_timeline.describe_tensor_steps(link_timeline.summary(steps), record, rate,
                                            link.ring_bytes_per_host(record["gradient_bytes"], args.hosts)))


def say(round_: int, workload: str, what: str, text: str) -> None:
    print(f"round {round_ + 1} {workload:20s} {what:36s} {text} (load {load()})", flush=True)


def print_table(args, chosen: list, ratios: list, variants: list, results: dict) -> None:
    print(f"\n{args.hosts} hosts x {args.ranks_per_host} rank(s) ({'a core' if args.hosts == 2 else 'half a core'} a "
          f"host) against one rank alone with a rank's share, "
          f"{args.repeat} round(s), medians (each round in brackets); link queue {args.queue_ms:g} ms, "
          f"TCP congestion control {args.congestion_control}, GPU-like step {args.step_ms:g} ms"
          + (f", each connection capped at {args.flow_cap:g} of the link" if args.flow_cap else "") + "; "
          f"load at the end {load()}")
    print(f"{'workload':20s} {'link ratio':>10s} {'variant':30s} {'efficiency':>22s} {'overlap limit':>13s}")
    for workload in chosen:
        name = workload.name
        alone = results.get((name, "alone"), [])
        if alone:
            print(f"{name:20s} one rank alone: {statistics.median(r['step_s'] for r in alone) * 1000:.0f} ms a step, "
                  f"{statistics.median(r['gradient_bytes'] for r in alone) / 1e6:.0f} MB of gradients")
        if (name, "control") in results:
            show(name, "-", "control (independent ranks)", results[(name, "control")], [])
        for ratio in ratios:
            for variant, _, _ in variants:
                show(name, f"{ratio:.2f}" if ratio else "unshaped", variant, results.get((name, ratio, variant), []),
                     [x for x in results.get((name, ratio, "limit"), []) if x])


def show(name: str, ratio: str, variant: str, values: list, limits: list) -> None:
    if not values:
        print(f"{name:20s} {ratio:>10s} {variant:30s} {'failed':>22s}")
        return
    rounds = ", ".join(f"{v:.2f}" for v in values)
    limit = f"{statistics.median(limits):.2f}" if limits else "-"
    print(f"{name:20s} {ratio:>10s} {variant:30s} {statistics.median(values):6.2f} ({rounds})".ljust(85)
          + f" {limit:>13s}")


if __name__ == "__main__":
    sys.exit(main())

"""Where a step's time goes on an emulated link, from the link probe's record and Horovod's timeline of its
traced steps (benchmarks/probes/link_probe), placed on one clock: the timeline's events count from the wall-clock
moment in its first event, and the probe's record has the offset between the wall clock and its own.

Per traced step, on rank 0: when the first and the last gradient existed (the backward pass's gradients, from the
probe's emulated layers; in cpu compute, when Horovod was first and last asked to reduce a tensor), when the
allreduces ran (Horovod's ALLREDUCE activity, the union over tensors) and how many MPI allreduce calls they
made (fused tensors share one), how much of the allreduce time fell before the last gradient (overlap with the
backward pass), and the step's end. Also the ideal for the link: each layer's bytes sent the moment its gradient
exists, back to back at the link's payload rate (`overlap_limit`).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

from benchmarks.common.emulated_link import TCP_PAYLOAD_SHARE


def read_timeline(path: Path) -> list:
    text = path.read_text().rstrip().rstrip(",")
    return json.loads(text if text.endswith("]") else text + "]")


def spans(events: list, wall_minus_monotonic: float) -> dict:
    """name -> [(start, end, tensor pid)] on the probe's clock (seconds), for top-level and nested activities."""
    origin = next(e["args"]["start_time_since_epoch_in_micros"] for e in events
                  if "start_time_since_epoch_in_micros" in e.get("args", {}))
    offset_s = origin / 1e6 - wall_minus_monotonic
    open_at: dict = defaultdict(list)
    found: dict = defaultdict(list)
    for event in events:
        phase, pid = event.get("ph"), event.get("pid")
        if phase == "B":
            open_at[pid].append((event["name"], event["ts"]))
        elif phase == "E" and open_at[pid]:
            name, start = open_at[pid].pop()
            found[name].append((offset_s + start / 1e6, offset_s + event["ts"] / 1e6, pid))
    return found


def union_seconds(intervals: list, until: float | None = None) -> float:
    total, end = 0.0, None
    for start, stop in sorted((s, e if until is None else min(e, until)) for s, e, *_ in intervals):
        if stop <= start:
            continue
        if end is None or start > end:
            total, end = total + stop - start, stop
        elif stop > end:
            total, end = total + stop - end, stop
    return total


def step_phases(record: dict, events: list) -> list:
    """One dict per traced step: times in ms from the step's start."""
    found = spans(events, record["wall_minus_monotonic"])
    ready = defaultdict(list)
    for step, _layer, at in record["gradients_ready"]:
        ready[step].append(at)
    phases = []
    for step in sorted(ready) or range(record["args"]["warmup"], record["args"]["warmup"] + record["args"]["trace"]):
        start, end = record["steps"][step]

        def inside(intervals, start=start, end=end):
            return [iv for iv in intervals if start <= iv[0] < end]

        allreduce = inside(found.get("ALLREDUCE", []))
        negotiated = inside(found.get("NEGOTIATE_ALLREDUCE", []))
        mpi_calls = {round(s, 6) for s, *_ in inside(found.get("MPI_ALLREDUCE", []))}
        times = sorted(ready[step]) or sorted(s for s, *_ in negotiated)
        if not times or not allreduce:
            continue
        last_gradient = times[-1]
        busy = union_seconds(allreduce)
        phases.append({
            "step_ms": (end - start) * 1000,
            "first_gradient_ms": (times[0] - start) * 1000, "last_gradient_ms": (last_gradient - start) * 1000,
            "first_allreduce_ms": (min(s for s, *_ in allreduce) - start) * 1000,
            "last_allreduce_end_ms": (max(e for _, e, _ in allreduce) - start) * 1000,
            "allreduce_busy_ms": busy * 1000,
            "overlapped": union_seconds(allreduce, until=last_gradient) / busy if busy else 0.0,
            "mpi_allreduce_calls": len(mpi_calls), "tensors": len({pid for *_, pid in allreduce}),
        })
    return phases


def summary(phases: list) -> dict:
    return {key: statistics.median(p[key] for p in phases) for key in phases[0]} if phases else {}


def overlap_limit(record: dict, rate_bps: float | None, bytes_per_host: float) -> float | None:
    """Efficiency if each layer's bytes (its share of the host's bytes a step, by its parameters) left the moment
    its gradient existed, back to back at the link's payload rate, and nothing else cost time: the alone step /
    (the last byte's arrival or the step, whichever is later). From the traced steps of the run alone; None
    without a link or gradient times."""
    if not rate_bps or not record["gradients_ready"]:
        return None
    share = [parameters / record["parameters"] for parameters in record["layer_parameters"]]
    per_step = defaultdict(list)
    for step, layer, at in record["gradients_ready"]:
        per_step[step].append((at, layer))
    limits = []
    for step, ready in per_step.items():
        start, end = record["steps"][step]
        sent = start
        for at, layer in sorted(ready):
            sent = max(sent, at) + share[layer] * bytes_per_host * 8 / (rate_bps * TCP_PAYLOAD_SHARE)
        limits.append((end - start) / max(end - start, sent - start))
    return statistics.median(limits)


def describe(phases: dict, record: dict) -> str:
    cpu = " | ".join(", ".join(f"{k} {v:.0f}" for k, v in rank.items()) for rank in record["cpu_ms_per_step"])
    return (f"step {phases.get('step_ms', 0):.0f} ms: gradients {phases.get('first_gradient_ms', 0):.0f}-"
            f"{phases.get('last_gradient_ms', 0):.0f}, allreduce {phases.get('first_allreduce_ms', 0):.0f}-"
            f"{phases.get('last_allreduce_end_ms', 0):.0f} (busy {phases.get('allreduce_busy_ms', 0):.0f}, "
            f"{phases.get('overlapped', 0):.0%} before the last gradient), "
            f"{phases.get('mpi_allreduce_calls', 0):.0f} MPI calls for {phases.get('tensors', 0):.0f} tensors; "
            f"per step by rank: {cpu}")


def tensor_steps(events: list) -> list:
    """Horovod's timeline alone (any script): one dict per step, times in ms from the step's first negotiation.
    A tensor's k-th negotiation is step k's; a negotiation starts when Horovod's background thread first sees the
    tensor asked for (its gradient was ready and the script's trainer enqueued it, or later if the thread was busy
    in a collective). Per step: the first and last negotiation, the allreduces' span and busy time (the union over
    tensors), the time the link could have worked but no allreduce ran (idle between the first negotiation and the
    last allreduce's end) and the period to the next step's first negotiation."""
    names = {e["pid"]: e["args"].get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    found = spans(events, 0.0)
    per_tensor: dict = defaultdict(lambda: defaultdict(list))
    for activity in ("NEGOTIATE_ALLREDUCE", "ALLREDUCE"):
        for start, end, pid in found.get(activity, []):
            if names.get(pid, "").startswith("horovod_allreduce."):
                per_tensor[pid][activity].append((start, end))
    counts = {pid: min(len(t["NEGOTIATE_ALLREDUCE"]), len(t["ALLREDUCE"])) for pid, t in per_tensor.items()}
    count = max(counts.values(), default=0)
    # the gradients: reduced every step (a script's own one-off allreduces, e.g. of a final figure, are not)
    tensors = [{activity: sorted(spans_) for activity, spans_ in per_tensor[pid].items()}
               for pid, n in counts.items() if n == count]
    if count < 2:
        return []
    firsts = [min(t["NEGOTIATE_ALLREDUCE"][k][0] for t in tensors) for k in range(count)]
    steps = []
    for k in range(count - 1):
        base = firsts[k]
        negotiations = [t["NEGOTIATE_ALLREDUCE"][k][0] for t in tensors]
        allreduces = [t["ALLREDUCE"][k] for t in tensors]
        end = max(e for _, e in allreduces)
        busy = union_seconds(allreduces)
        steps.append({
            "period_ms": (firsts[k + 1] - base) * 1000, "last_negotiation_ms": (max(negotiations) - base) * 1000,
            "first_allreduce_ms": (min(s for s, _ in allreduces) - base) * 1000,
            "last_allreduce_end_ms": (end - base) * 1000, "allreduce_busy_ms": busy * 1000,
            "link_idle_ms": (end - base - busy) * 1000, "after_last_allreduce_ms": (firsts[k + 1] - end) * 1000,
        })
    return steps


def describe_tensor_steps(steps: dict, record: dict, rate_bps: float | None, bytes_per_host: float) -> str:
    """tensor_steps' medians, the link's time for a host's bytes against the allreduces' busy time, and the ranks'
    CPU per step by thread kind, in a line."""
    cpu = " | ".join(", ".join(f"{k} {v:.0f}" for k, v in rank.items()) for rank in record["cpu_ms_per_step"])
    link = ""
    if rate_bps and steps.get("allreduce_busy_ms"):
        seconds = bytes_per_host * 8 / (rate_bps * TCP_PAYLOAD_SHARE)
        link = f" (the link needs {seconds * 1000:.0f} ms: {seconds * 1000 / steps['allreduce_busy_ms']:.0%} of busy)"
    return (f"period {steps.get('period_ms', 0):.0f} ms: negotiations 0-{steps.get('last_negotiation_ms', 0):.0f}, "
            f"allreduce {steps.get('first_allreduce_ms', 0):.0f}-{steps.get('last_allreduce_end_ms', 0):.0f} "
            f"(busy {steps.get('allreduce_busy_ms', 0):.0f}{link}, idle {steps.get('link_idle_ms', 0):.0f}), "
            f"{steps.get('after_last_allreduce_ms', 0):.0f} from the last allreduce to the next step; "
            f"CPU per step by rank: {cpu}")

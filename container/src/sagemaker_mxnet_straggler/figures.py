"""The ranks' timings combined, on rank 0: which rank the others wait for, by how much, at what cost. Standard
library only (the host's unit tests run it on recorded figures).

Each sample is one timed step: every rank's wait (from its gradients being ready to its allreduces being done) and
its step time (since the previous sample, over the steps between). Hosts' clocks are not comparable, so nothing here
compares two ranks' clocks: a synchronous allreduce ends on every rank at about the same moment, so a rank's wait is
the latest rank's arrival minus its own, plus the transfer, and a rank's lateness after the median rank is the median
rank's wait minus its own. The median rank is the one with the higher of the two middle waits (the earlier of the two
middle arrivals), so that a slow host holding half the ranks is measured against the others, not against a point
between them.

Rank 0 keeps a bounded number of samples (when full, every other one is dropped and from then on only every second,
fourth, ... sample is kept: an even spread over the job) and exact running sums of the time waited.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# A rank stands out when its median lateness is at least this share of the median step time, and it is later than the
# median rank in at least CONSISTENT of the timed steps. Balanced 2x2 jobs on a loaded 2-core machine had their latest
# rank 2-7% of a step late, in 60-75% of the steps, never both; made slow, in 95-100% (docs/straggler.md).
STANDOUT_SHARE = 0.10
CONSISTENT = 0.75
MIN_SAMPLES = 5  # a verdict needs this many timed steps
# A timed step costs up to about a step (docs/benchmarks/straggler-overhead.md): at least EVERY steps apart, and on
# short steps about EVERY_S seconds apart, so that it costs under 1% of a step even where a step is 65 ms (MNIST).
EVERY = 10
EVERY_S = 10.0
KEPT_VALUES = 200_000  # samples kept x ranks, at most: rank 0's memory and the time of its medians stay small
MAX_KEPT = 2048


def steps_between_timed(step_s: float, every_s: float = EVERY_S) -> int:
    """How many steps after this timed step the next is: about every_s seconds of steps of step_s, and at least EVERY
    (also when the step time is not known yet, or every_s is 0)."""
    if not step_s > 0 or not every_s > 0 or math.isinf(step_s):
        return EVERY
    return max(EVERY, round(every_s / step_s))


def reference_wait(waits: list[float]) -> float:
    """The median rank's wait: of the two middle ones, the longer (the earlier arrival)."""
    return sorted(waits)[len(waits) // 2]


def lateness(waits: list[float]) -> list[float]:
    """Each rank's arrival after the median rank's, in seconds (negative: earlier)."""
    reference = reference_wait(waits)
    return [reference - wait for wait in waits]


def median(values) -> float:
    ordered = sorted(value for value in values if not math.isnan(value))
    if not ordered:
        return math.nan
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


@dataclass
class Sample:
    step: int  # the trainer's step count at this sample
    seconds: float  # rank 0's time since the first sample
    waits: list[float]  # by rank
    step_times: list[float]  # by rank; nan at the first sample (no previous one)
    spanned: int = 0  # the steps it stands for (since the previous sample): set by Figures.add
    late: list[float] = field(init=False)

    def __post_init__(self):
        self.late = lateness(self.waits)


@dataclass
class Figures:
    """Every sample rank 0 received, kept evenly spread, and the sums that must be exact."""

    hosts: list[str]  # by rank
    kept: list[Sample] = field(default_factory=list)
    stride: int = 1  # keep every stride-th sample
    received: int = 0
    timed_steps: int = 0  # steps the samples with a step time stand for
    waited_s: list[float] = field(default_factory=list)  # by rank: estimated seconds waited on later ranks

    @property
    def capacity(self) -> int:
        return max(64, min(MAX_KEPT, KEPT_VALUES // max(1, len(self.hosts))))

    @property
    def first_step(self) -> int | None:
        return self.kept[0].step if self.kept else None

    @property
    def last_step(self) -> int | None:
        return self.kept[-1].step if self.kept else None

    def add(self, sample: Sample, steps: int) -> None:
        """A sample standing for `steps` steps (those since the previous sample)."""
        sample.spanned = steps
        if not self.waited_s:
            self.waited_s = [0.0] * len(sample.waits)
        if not any(math.isnan(value) for value in sample.step_times):
            self.timed_steps += steps
            shortest = min(sample.waits)
            self.waited_s = [total + (wait - shortest) * steps for total, wait in zip(self.waited_s, sample.waits)]
        if self.received % self.stride == 0:
            self.kept.append(sample)
            if len(self.kept) > self.capacity:
                self.kept, self.stride = self.kept[::2], self.stride * 2
        self.received += 1

    def since(self, step: int) -> Figures:
        """The kept samples after `step` (a log line's window)."""
        return Figures(self.hosts, [s for s in self.kept if s.step > step], self.stride)

    def rank_medians(self) -> tuple[list[float], list[float]]:
        """(median lateness, median step time) of each rank over the kept samples."""
        ranks = range(len(self.hosts))
        return ([median(s.late[r] for s in self.kept) for r in ranks],
                [median(s.step_times[r] for s in self.kept) for r in ranks])

    def late_shares(self) -> list[float]:
        """Each rank's share of the kept samples in which it arrived after the median rank."""
        return [self.late_share((rank,)) for rank in range(len(self.hosts))]

    def lateness_of(self, ranks: tuple[int, ...]) -> float:
        """The median, over the kept samples, of the latest of these ranks' lateness: what the others wait for them."""
        return median(max(s.late[rank] for rank in ranks) for s in self.kept)

    def late_share(self, ranks: tuple[int, ...]) -> float:
        """The share of the kept samples in which the latest of these ranks arrived after the median rank."""
        if not self.kept:
            return math.nan
        return sum(max(s.late[rank] for rank in ranks) > 0 for s in self.kept) / len(self.kept)


@dataclass(frozen=True)
class Verdict:
    """Whom the others wait for: one rank, or every rank of one host (whole_host), by how much (lateness_s: a rank's
    median lateness; a host's, the median of its latest rank's at each step), at what share of a step; when none
    stands out, the latest rank, for the record. `also`: other ranks that stand out, latest first."""

    ranks: tuple[int, ...]
    host: str
    lateness_s: float
    step_s: float
    late_share: float = math.nan  # of the latest: the share of the steps in which it was late
    stands_out: bool = False
    whole_host: bool = False
    also: tuple[tuple[int, str, float], ...] = ()  # (rank, host, lateness_s)

    @property
    def share(self) -> float:
        return self.lateness_s / self.step_s if self.step_s > 0 else math.nan

    def text(self) -> str:
        if not self.ranks:
            return f"fewer than {MIN_SAMPLES} timed steps: no verdict"
        who = (f"{self.host} (ranks {', '.join(map(str, self.ranks))})" if self.whole_host
               else f"rank {self.ranks[0]} on {self.host}")
        figures = f"reaches each step {seconds(self.lateness_s)} after the median rank (step {seconds(self.step_s)})"
        if not self.stands_out:
            if self.share >= STANDOUT_SHARE:
                return (f"no rank stands out: the latest, {who}, is {seconds(self.lateness_s)} after the median rank "
                        f"(step {seconds(self.step_s)}) but late in only {self.late_share:.0%} of the steps")
            return f"no rank stands out: the latest, {who}, {figures}, {self.share:.1%} of a step"
        also = "".join(f"; also rank {rank} on {host}, {seconds(late)}" for rank, host, late in self.also[:3])
        return f"{who} {figures}: the other ranks wait {self.share:.0%} of the time for it{also}"


def seconds(value: float) -> str:
    """Two significant digits: '0.21 s', '1.3 s', '0.0042 s', '12 s'."""
    if value == 0 or math.isnan(value):
        return f"{value:g} s"
    rounded = float(f"{value:.2g}")
    digits = max(0, 1 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:.{digits}f} s"


def judge(figures: Figures) -> Verdict:
    """The latest rank the others wait for: one whose median lateness is STANDOUT_SHARE of a step or more and that is
    late in CONSISTENT of the steps or more, or one of a host (with several ranks, not all of the job's) whose every
    rank is that late, and the latest of them that consistent: then the host."""
    if len(figures.kept) < MIN_SAMPLES:
        return Verdict((), "", math.nan, math.nan)
    late, steps = figures.rank_medians()
    step, shares = median(steps), figures.late_shares()
    by_lateness = sorted(range(len(late)), key=lambda rank: -late[rank])
    on_host = {host: tuple(r for r, name in enumerate(figures.hosts) if name == host) for host in figures.hosts}

    def host_stands_out(host: str) -> bool:
        ranks = on_host[host]
        return (1 < len(ranks) < len(late) and all(late[rank] >= STANDOUT_SHARE * step for rank in ranks)
                and figures.late_share(ranks) >= CONSISTENT)

    standing = [rank for rank in by_lateness if late[rank] >= STANDOUT_SHARE * step and
                (shares[rank] >= CONSISTENT or host_stands_out(figures.hosts[rank]))]
    if not standing:
        latest = by_lateness[0]
        return Verdict((latest,), figures.hosts[latest], late[latest], step, shares[latest])
    first = standing[0]
    host = figures.hosts[first]
    whole_host = host_stands_out(host)
    named = on_host[host] if whole_host else (first,)
    also = tuple((rank, figures.hosts[rank], late[rank]) for rank in standing if rank not in named)
    lateness_s = figures.lateness_of(named) if whole_host else late[first]
    return Verdict(named, host, lateness_s, step, figures.late_share(named), True, whole_host, also)

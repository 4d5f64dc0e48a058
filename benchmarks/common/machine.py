"""The machine the benchmarks run on: its load average as the studies print it beside each figure (this machine is
shared; a figure means little without the load it ran under)."""

import os


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())

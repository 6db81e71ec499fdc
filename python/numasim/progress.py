"""A one-line progress bar for long runs: simulated time, NUMA events per second, ETA.

    numasim.run(scenario, progress=Progress())   # draws on stderr, \\r-updated

The engine calls the bar with ``(sim_ns, max_sim_ns, events)``: simulated time so far,
the run's limit (``run.max_sim_s``; a workload usually finishes well before it, so the
ETA is an upper bound and shown as "≤"), and cumulative NUMA events (PTE updates + hint
faults + migrations + TLB shootdowns). Redraws at most ``max_rate`` times per second;
``close()`` ends the line. No third-party dependency.
"""

from __future__ import annotations

import sys
import time

NS = 1_000_000_000


def _si(x: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.1f}{unit}"
    return f"{x:.0f}"


def _duration(s: float) -> str:
    s = max(0, int(round(s)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


class Progress:
    """Callable progress bar. ``stream`` defaults to sys.stderr; ``clock`` (wall seconds)
    and ``width`` (bar cells) are there for tests."""

    def __init__(self, stream=None, max_rate: float = 5.0, width: int = 24, label: str = "",
                 clock=time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.min_interval = 1.0 / max_rate if max_rate > 0 else 0.0
        self.width = width
        self.label = label
        self.clock = clock
        self.start = clock()
        self.last_draw = None
        self.last_len = 0
        self.updates = 0  # redraws done
        self.last = None  # the latest (sim_ns, max_ns, events)

    def reset(self, label: str | None = None) -> None:
        """Start timing a new run (rates and ETA restart); the line is reused."""
        if label is not None:
            self.label = label
        self.start = self.clock()
        self.last_draw = None
        self.last = None

    def __call__(self, sim_ns: int, max_ns: int, events: int):
        self.last = (int(sim_ns), int(max_ns), int(events))
        now = self.clock()
        if self.last_draw is not None and now - self.last_draw < self.min_interval:
            return None
        self.last_draw = now
        self._draw(self.render(*self.last, elapsed=now - self.start))
        return None

    def render(self, sim_ns: int, max_ns: int, events: int, elapsed: float) -> str:
        """The bar's text for one update (no \\r)."""
        frac = min(1.0, sim_ns / max_ns) if max_ns > 0 else 0.0
        filled = int(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        parts = [f"{self.label} " if self.label else "",
                 f"[{bar}] sim {sim_ns / NS:.2f}/{max_ns / NS:g} s",
                 f"  {_si(events)} events"]
        if elapsed > 0:
            parts.append(f"  {_si(events / elapsed)} ev/s")
            if 0 < frac < 1:
                parts.append(f"  ETA ≤ {_duration(elapsed * (1 - frac) / frac)}")
        return "".join(parts)

    def _draw(self, text: str) -> None:
        pad = " " * max(0, self.last_len - len(text))
        try:
            self.stream.write("\r" + text + pad)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stream must not stop the run
            self.min_interval = float("inf")
            return
        self.last_len = len(text)
        self.updates += 1

    def close(self) -> None:
        """Erase the bar (the caller prints its own result afterwards)."""
        if self.updates:
            self.stream.write("\r" + " " * self.last_len + "\r")
            self.stream.flush()
            self.last_len = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

"""A one-line progress bar for long runs: how much of the run is done, simulated time, NUMA
events per second, ETA.

    numasim.run(scenario, progress=Progress())   # draws on stderr, \\r-updated

The engine calls the bar with ``(sim_ns, max_sim_ns, events, done)``: simulated time so far,
the run's limit (``run.max_sim_s``), cumulative NUMA events (PTE updates + hint faults +
migrations + TLB shootdowns), and the fraction of the run done: of the workloads' planned work
(passes of their store streams, their timed loops and sleeps), or of the time limit if that
is further. The ETA extrapolates that fraction. Redraws at most ``max_rate`` times per second;
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
        self.last = None  # the latest (sim_ns, max_ns, events, done)

    def reset(self, label: str | None = None) -> None:
        """Start timing a new run (rates and ETA restart); the line is reused."""
        if label is not None:
            self.label = label
        self.start = self.clock()
        self.last_draw = None
        self.last = None

    def __call__(self, sim_ns: int, max_ns: int, events: int, done: float | None = None):
        if done is None:  # a caller without the engine's estimate: the time limit's share
            done = sim_ns / max_ns if max_ns > 0 else 0.0
        self.last = (int(sim_ns), int(max_ns), int(events), float(done))
        now = self.clock()
        if self.last_draw is not None and now - self.last_draw < self.min_interval:
            return None
        self.last_draw = now
        self._draw(self.render(*self.last, elapsed=now - self.start))
        return None

    def render(self, sim_ns: int, max_ns: int, events: int, done: float, elapsed: float) -> str:
        """The bar's text for one update (no \\r)."""
        frac = min(1.0, max(0.0, done))
        filled = int(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        parts = [f"{self.label} " if self.label else "",
                 f"[{bar}] {100 * frac:3.0f}%  sim {sim_ns / NS:.2f} s",
                 f"  {_si(events)} events"]
        if elapsed > 0:
            parts.append(f"  {_si(events / elapsed)} ev/s")
            if 0.01 <= frac < 1:  # below 1% the extrapolation says little
                parts.append(f"  ETA {_duration(elapsed * (1 - frac) / frac)}")
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


class RunsProgress:
    """One status line for a set of runs, some of them at once (`reproduce`, `run
    --iterations`): which run of how many is going and how far it is, how many are done,
    and an ETA for the set.

        status = RunsProgress(["base", "patched"], title="delay-mapping")
        status.update("base", 0.4)   # run 1/2 is 40% done (started on its first update)
        status.finish("base")
        status.close()
    """

    def __init__(self, keys, title: str = "", stream=None, max_rate: float = 4.0, clock=time.monotonic):
        self.keys = list(keys)
        self.labels = {k: "-".join(map(str, k)) if isinstance(k, tuple) else str(k) for k in self.keys}
        self.title = title
        self.stream = stream if stream is not None else sys.stderr
        self.min_interval = 1.0 / max_rate if max_rate > 0 else 0.0
        self.clock = clock
        self.start_time = clock()
        self.running: dict = {}  # key -> fraction done, in start order
        self.finished: set = set()
        self.last_draw = None
        self.bar = Progress(stream=self.stream, max_rate=0, clock=clock)  # the line drawing

    def start(self, key) -> None:
        self.running.setdefault(key, 0.0)
        self.redraw(force=True)  # a run starting is news: not held back by max_rate

    def update(self, key, done: float) -> None:
        news = key not in self.running and key not in self.finished  # its first report: it started
        if key not in self.finished:
            self.running[key] = min(1.0, max(0.0, float(done)))
        self.redraw(force=news)

    def finish(self, key) -> None:
        self.running.pop(key, None)
        self.finished.add(key)
        self.redraw(force=True)

    def fraction(self) -> float:
        """Of the whole set: finished runs count 1, running ones their fraction."""
        return (len(self.finished) + sum(self.running.values())) / max(1, len(self.keys))

    def render(self, elapsed: float) -> str:
        n = len(self.keys)
        runs = [f"run {self.keys.index(k) + 1}/{n} {self.labels[k]} {100 * f:.0f}%" for k, f in self.running.items()]
        parts = [f"{self.title}: " if self.title else "", ", ".join(runs) or "starting",
                 f"  [{len(self.finished)}/{n} done]"]
        frac = self.fraction()
        if elapsed > 0 and 0.01 <= frac < 1:
            parts.append(f"  ETA {_duration(elapsed * (1 - frac) / frac)}")
        return "".join(parts)

    def redraw(self, force: bool = False) -> None:
        now = self.clock()
        if not force and self.last_draw is not None and now - self.last_draw < self.min_interval:
            return
        self.last_draw = now
        self.bar._draw(self.render(now - self.start_time))

    def close(self) -> None:
        """Erase the line (the caller prints its own output afterwards)."""
        self.bar.close()

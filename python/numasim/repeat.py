"""Repeated runs: one scenario, N iterations with seeds seed, seed+1, ..., in parallel
local processes. Every iteration is its own seeded simulation, so the results do not
depend on how many run at once."""

from __future__ import annotations

import os
from numasim import exceptions
from numasim.api import resolve
from numasim.result import Result
from numasim.scenario import UsageError, scenario_toml

MAX_JOBS = 64  # parallel processes, whatever the host
MAX_ITERATIONS = 100  # every result is kept in memory until the group is summarised or saved


def cpu_cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_jobs() -> int:
    """Two processes, or one on a single-CPU host."""
    return min(2, cpu_cores())


def check_iterations(iterations) -> int:
    """``iterations`` if in 1..MAX_ITERATIONS, else UsageError."""
    if not 1 <= int(iterations) <= MAX_ITERATIONS:
        raise UsageError(f"--iterations must be in 1..{MAX_ITERATIONS}, got {iterations}")
    return int(iterations)


def check_jobs(jobs) -> int:
    """``jobs`` if in 1..MAX_JOBS, else UsageError. More jobs than CPUs is allowed (the runs
    then share them); the command line warns about it."""
    if not 1 <= int(jobs) <= MAX_JOBS:
        raise UsageError(f"--jobs must be in 1..{MAX_JOBS}, got {jobs}")
    return int(jobs)


def iteration_scenarios(scenario, iterations: int, seed: int | None = None) -> list:
    """[(seed, TOML)] for ``iterations`` runs of ``scenario`` (path, TOML text or dict).
    Seeds start at ``seed``, else at the scenario's own seed (the engine's default if unset).
    The scenario is validated first, so a bad one raises ScenarioError here."""
    check_iterations(iterations)
    text = scenario_toml(scenario)
    first = int(seed) if seed is not None else int(resolve(text)["seed"])
    out = []
    for i in range(iterations):
        toml = scenario_toml(text, seed=first + i)
        out.append((first + i, toml))
    return out


def _raise(payload: str):
    kind, _, msg = payload.partition(": ")
    cls = getattr(exceptions, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, exceptions.NumasimError)):
        cls = exceptions.NumasimError
    raise cls(msg)


class _Followers:
    """Passes a run's start, progress and end on to a RunsProgress and to ``on_done(k, n)``."""

    def __init__(self, status, on_done, n: int):
        self.status, self.on_done, self.n, self.done = status, on_done, n, 0

    def start(self, key) -> None:
        if self.status is not None:
            self.status.start(key)

    def update(self, key, done: float) -> None:
        if self.status is not None:
            self.status.update(key, done)

    def finish(self, key) -> None:
        self.done += 1
        if self.status is not None:
            self.status.finish(key)
        if self.on_done:
            self.on_done(self.done, self.n)


def iteration_label(seed: int) -> str:
    return f"seed {seed}"


def run_iterations(scenario, iterations: int, seed: int | None = None, jobs: int | None = None,
                   progress=None, on_done=None, status=None) -> list:
    """Run ``iterations`` seeded copies of ``scenario`` and return their Results in seed
    order (an IncompleteRunWarning for each that stopped at run.max_sim_s). ``jobs``
    parallel processes (1..MAX_JOBS; default 2, or 1 on a single-CPU host); ``progress`` is
    passed to the engine when the runs happen in this process (one job, or one iteration);
    ``on_done(k, n)`` is called as each iteration finishes; ``status`` (a
    progress.RunsProgress over the labels ``seed S``) follows every run."""
    from numasim.api import run, warn_if_incomplete
    from numasim.pool import run_scenarios

    jobs = check_jobs(default_jobs() if jobs is None else jobs)
    runs = iteration_scenarios(scenario, iterations, seed)
    n = len(runs)
    if min(jobs, n) == 1 and status is None:
        results = []
        for k, (_, toml) in enumerate(runs):
            results.append(run(toml, progress=progress))
            if on_done:
                on_done(k + 1, n)
        return results
    scenarios = {iteration_label(s): toml for s, toml in runs}
    raw = run_scenarios(scenarios, jobs=jobs, status=_Followers(status, on_done, n), stop_on_error=True)
    for state, payload in raw.values():
        if state != "ok":
            _raise(payload)
    results = [Result(raw[key][1]) for key in scenarios]
    for r in results:
        warn_if_incomplete(r)
    return results

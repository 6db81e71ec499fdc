"""Repeated runs: one scenario, N iterations with seeds seed, seed+1, ..., in parallel
local processes. Every iteration is its own seeded simulation, so the results do not
depend on how many run at once."""

from __future__ import annotations

import os
from concurrent.futures import as_completed

from numasim import exceptions
from numasim.api import resolve
from numasim.pool import process_pool
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


def run_iterations(scenario, iterations: int, seed: int | None = None, jobs: int | None = None,
                   progress=None, on_done=None) -> list:
    """Run ``iterations`` seeded copies of ``scenario`` and return their Results in seed
    order (an IncompleteRunWarning for each that stopped at run.max_sim_s). ``jobs``
    parallel processes (1..MAX_JOBS; default 2, or 1 on a single-CPU host); ``progress`` is passed to the engine
    when the runs happen in this process (one job, or one iteration); ``on_done(k, n)`` is
    called as each iteration finishes."""
    from numasim.api import run, warn_if_incomplete
    from numasim.experiments.registry import _run_one

    jobs = check_jobs(default_jobs() if jobs is None else jobs)
    runs = iteration_scenarios(scenario, iterations, seed)
    n = len(runs)
    jobs = min(jobs, n)
    results: list = [None] * n
    if jobs == 1:
        for k, (_, toml) in enumerate(runs):
            results[k] = run(toml, progress=progress)
            if on_done:
                on_done(k + 1, n)
        return results
    with process_pool(jobs) as pool:
        futures = {pool.submit(_run_one, toml): k for k, (_, toml) in enumerate(runs)}
        for done, fut in enumerate(as_completed(futures), 1):
            status, payload = fut.result()
            if status != "ok":
                for f in futures:
                    f.cancel()
                _raise(payload)
            results[futures[fut]] = Result(payload)
            warn_if_incomplete(results[futures[fut]])
            if on_done:
                on_done(done, n)
    return results

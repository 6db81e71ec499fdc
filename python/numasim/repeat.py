"""Repeated runs: one scenario, N iterations with seeds seed, seed+1, ..., in parallel
local processes. Every iteration is its own seeded simulation, so the results do not
depend on how many run at once."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed

from numasim import exceptions
from numasim.api import resolve
from numasim.result import Result
from numasim.scenario import UsageError, scenario_toml

MAX_JOBS = 2  # the project's machines have 2 cores


def iteration_scenarios(scenario, iterations: int, seed: int | None = None) -> list:
    """[(seed, TOML)] for ``iterations`` runs of ``scenario`` (path, TOML text or dict).
    Seeds start at ``seed``, else at the scenario's own seed (the engine's default if unset).
    The scenario is validated first, so a bad one raises ScenarioError here."""
    if iterations < 1:
        raise UsageError("--iterations must be at least 1")
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


def run_iterations(scenario, iterations: int, seed: int | None = None, jobs: int = MAX_JOBS,
                   progress=None, on_done=None) -> list:
    """Run ``iterations`` seeded copies of ``scenario`` and return their Results in seed
    order (an IncompleteRunWarning for each that stopped at run.max_sim_s). ``jobs``
    parallel processes (at most 2); ``progress`` is passed to the engine
    when the runs happen in this process (one job, or one iteration); ``on_done(k, n)`` is
    called as each iteration finishes."""
    from numasim.api import run, warn_if_incomplete
    from numasim.experiments.registry import _run_one

    runs = iteration_scenarios(scenario, iterations, seed)
    n = len(runs)
    jobs = max(1, min(int(jobs), MAX_JOBS, n))
    results: list = [None] * n
    if jobs == 1:
        for k, (_, toml) in enumerate(runs):
            results[k] = run(toml, progress=progress)
            if on_done:
                on_done(k + 1, n)
        return results
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
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

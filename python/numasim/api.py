"""run(): assemble the scenario, hand it to the engine, wrap the result."""

from __future__ import annotations

import inspect
import json
import os
import warnings

from numasim import _engine
from numasim.result import IncompleteRunWarning, Result
from numasim.scenario import scenario_toml


def host_memory_bytes():
    """MemAvailable from /proc/meminfo, or None where it cannot be read.

    NUMASIM_HOST_MEMORY_BYTES overrides it (tests, or to cap the engine)."""
    env = os.environ.get("NUMASIM_HOST_MEMORY_BYTES")
    if env:
        return int(env)
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def run(
    scenario=None,
    *,
    workload=None,
    machine=None,
    balancing=None,
    seed=None,
    features=None,
    sysctl=None,
    overrides=None,
    progress=None,
    **workload_params,
) -> Result:
    """Run one scenario and return its Result.

    ``scenario`` is a TOML path, TOML text or dict. The keywords build or
    amend it: ``run(workload="numa02", balancing=False, size_mib=64)``.
    ``overrides`` maps dotted keys to values (``{"machine.cpus_per_node": 4}``).
    ``progress``, if given, is called now and then with ``(sim_ns, max_sim_ns, events,
    done)`` (e.g. a ``numasim.progress.Progress``; ``done``: the fraction of the run done, of
    the workloads' planned work or of max_sim_ns if further); a callable that takes three
    arguments gets the first three. Its return value is ignored.

    A run that stops at ``run.max_sim_s`` before its workloads finish is returned with
    ``completed == False`` and an ``IncompleteRunWarning``.
    """
    text = scenario_toml(
        scenario, workload=workload, machine=machine, balancing=balancing,
        seed=seed, features=features, sysctl=sysctl, overrides=overrides,
        **workload_params,
    )
    if progress is None:  # engine modules without the keyword keep working
        result = Result(_engine.run(text, host_memory_bytes()))
    else:
        result = Result(_engine.run(text, host_memory_bytes(), progress=four_arguments(progress)))
    warn_if_incomplete(result)
    return result


def four_arguments(progress):
    """``progress`` if it takes (sim_ns, max_sim_ns, events, done), else a wrapper that passes
    it the first three (the callables of numasim before ``done``)."""
    try:
        inspect.signature(progress).bind(0, 0, 0, 0.0)
        return progress
    except TypeError:
        return lambda sim_ns, max_ns, events, done: progress(sim_ns, max_ns, events)
    except ValueError:  # no signature to read (some builtins): assume the current form
        return progress


def warn_if_incomplete(result: Result) -> None:
    """IncompleteRunWarning when ``result`` stopped at run.max_sim_s."""
    if not result.completed:
        warnings.warn(result.incomplete_message(), IncompleteRunWarning, stacklevel=3)


def resolve(scenario=None, **kwargs) -> dict:
    """Validate a scenario and return it fully resolved (nothing is run)."""
    return json.loads(_engine.resolve(scenario_toml(scenario, **kwargs)))


def machine_profiles() -> list:
    """Names of the built-in machine profiles."""
    return list(_engine.machine_profiles())


def machine_profile_toml(name: str) -> str:
    """The TOML text of one built-in machine profile."""
    return _engine.machine_profile_toml(name)


def features() -> list:
    """Kernel features the engine knows: name, since, seed, summary, modelled, default."""
    return json.loads(_engine.features())


def kernel_versions() -> list:
    """The kernel releases a scenario may name (`[kernel] version`), oldest first."""
    return list(json.loads(_engine.kernels())["versions"])


def kernel_profile(version: str) -> dict:
    """What release ``version`` runs: each mechanism's variant (variants.rs: name, commit, first
    release, whether the commit was checked, summary) and each feature on or off.
    ValueError for an unknown version, naming the known ones."""
    k = json.loads(_engine.kernels())
    if version not in k["profiles"]:
        raise ValueError(f"unknown kernel version `{version}`, expected one of {', '.join(k['versions'])}")
    prof = k["profiles"][version]
    mechanisms = []
    for m, i in zip(k["mechanisms"], prof["variants"]):
        v = m["variants"][i]
        mechanisms.append({"mechanism": m["name"], "title": m["title"], "kernel": m["kernel"],
                           "variant": v["name"], "commit": v["commit"], "since": v["since"],
                           "checked": v["checked"], "summary": v["summary"]})
    features = {f["name"]: on for f, on in zip(k["features"], prof["features"])}
    return {"version": version, "default": version == k["default"], "mechanisms": mechanisms,
            "features": features}

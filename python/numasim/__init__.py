"""numasim: a deterministic simulator of Linux automatic NUMA balancing.

    >>> import numasim
    >>> r = numasim.run(workload="numa02", balancing=True)
    >>> r.elapsed_s, r.counters["numa_hint_faults"], r.hint_local_percent(0.1)
"""

from numasim.api import (
    features,
    kernel_profile,
    kernel_versions,
    machine_profile_toml,
    machine_profiles,
    resolve,
    run,
)
from numasim.exceptions import (
    CapacityError,
    InternalError,
    NumasimError,
    ScenarioError,
    SimulationError,
)
from numasim.result import IncompleteRunWarning, Result
from numasim.scenario import DEFAULT_MACHINE, load_scenario

__version__ = "0.1.0"


def sweep(spec, out=None, **kwargs):
    """Run a sweep spec and return its DataFrame, a row per point (numasim.sweeps.sweep;
    docs/sweeps.md)."""
    from numasim.sweeps import sweep as run_sweep

    return run_sweep(spec, out, **kwargs)


def tune(spec, **kwargs):
    """Search the scan sysctls for an objective under constraints (numasim.tuning.tune;
    docs/sweeps.md)."""
    from numasim.tuning import tune as run_tune

    return run_tune(spec, **kwargs)

def load_results(path):
    """Saved results (a result JSON, or a directory of them, searched recursively) as one
    DataFrame, a row per run: path, then Result.summary()'s columns (numasim.frames)."""
    from numasim.frames import load_results as load

    return load(path)

# Submodules reachable as attributes after `import numasim` (numasim.progress.Progress(),
# numasim.storage.load_result, ...), imported on first use: matplotlib and pyarrow stay
# unloaded until needed.
SUBMODULES = ("compare", "experiments", "plot", "progress", "repeat", "report", "scenario", "storage")


def __getattr__(name):
    if name in SUBMODULES:
        import importlib

        return importlib.import_module(f"numasim.{name}")
    raise AttributeError(f"module 'numasim' has no attribute {name!r}")

__all__ = [
    "run",
    "sweep",
    "tune",
    "load_results",
    "resolve",
    "load_scenario",
    "Result",
    "machine_profiles",
    "machine_profile_toml",
    "features",
    "kernel_versions",
    "kernel_profile",
    "NumasimError",
    "ScenarioError",
    "CapacityError",
    "SimulationError",
    "InternalError",
    "IncompleteRunWarning",
    "DEFAULT_MACHINE",
]

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

"""numasim: a deterministic simulator of Linux automatic NUMA balancing.

    >>> import numasim
    >>> r = numasim.run(workload="numa02", balancing=True)
    >>> r.elapsed_s, r.counters["numa_hint_faults"], r.hint_local_percent(0.1)
"""

from numasim.api import (
    features,
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

__all__ = [
    "run",
    "resolve",
    "load_scenario",
    "Result",
    "machine_profiles",
    "machine_profile_toml",
    "features",
    "NumasimError",
    "ScenarioError",
    "CapacityError",
    "SimulationError",
    "InternalError",
    "IncompleteRunWarning",
    "DEFAULT_MACHINE",
]

"""The error tree, defined by the native module and re-exported here.

- ``NumasimError``: base of everything below.
- ``ScenarioError``: the scenario is invalid; ``.errors`` lists every problem
  as ``{"loc", "kind", "msg"}``.
- ``CapacityError``: this host cannot hold the simulation.
- ``SimulationError``: the simulated kernel failed (e.g. out of memory under
  MPOL_BIND): the scenario asks for something the machine cannot do.
- ``InternalError``: a bug in numasim (an engine panic ends up here).
"""

from numasim import _engine
from numasim._engine import (  # noqa: F401
    CapacityError,
    InternalError,
    NumasimError,
    ScenarioError,
)

# Not in the original binding contract; fall back to the base class.
SimulationError = getattr(_engine, "SimulationError", NumasimError)

__all__ = [
    "NumasimError", "ScenarioError", "CapacityError", "SimulationError", "InternalError",
    "error_list",
]


def error_list(exc):
    """Return ``[{"loc", "kind", "msg"}, ...]`` for any NumasimError."""
    errors = getattr(exc, "errors", None)
    if callable(errors):  # tolerate a pydantic-style method
        errors = errors()
    if errors:
        return [
            {
                "loc": str(e.get("loc", "")),
                "kind": str(e.get("kind", "")),
                "msg": str(e.get("msg", "")),
            }
            for e in errors
        ]
    return [{"loc": "", "kind": type(exc).__name__, "msg": str(exc)}]

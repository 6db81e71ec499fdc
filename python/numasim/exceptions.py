"""The error tree, defined by the native module and re-exported here.

- ``NumasimError``: base of everything below.
- ``ScenarioError``: the scenario is invalid; ``.errors`` lists every problem
  as ``{"loc", "kind", "msg"}``.
- ``CapacityError``: this host cannot hold the simulation.
- ``InternalError``: a bug in numasim (an engine panic ends up here).
"""

from numasim._engine import (  # noqa: F401
    CapacityError,
    InternalError,
    NumasimError,
    ScenarioError,
)

__all__ = ["NumasimError", "ScenarioError", "CapacityError", "InternalError", "error_list"]


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

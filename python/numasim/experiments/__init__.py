"""Named experiments: scenarios, checks and references, reproducible by name."""

from numasim.experiments.registry import (
    REGISTRY,
    Experiment,
    ExperimentResult,
    Row,
    get,
    names,
)

__all__ = ["REGISTRY", "Experiment", "ExperimentResult", "Row", "get", "names"]

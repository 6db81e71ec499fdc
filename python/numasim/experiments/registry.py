"""Experiment registry and the shared machinery: parallel runs, rows, output."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from numasim.result import Result


@dataclass
class Row:
    """One line of an experiment's report."""

    metric: str
    values: dict  # column -> number (None when the run failed)
    reference: dict = field(default_factory=dict)  # column -> published number
    check: str = ""  # the tolerance rule in words; "" for plain measurements
    ok: bool = True
    # "invariant": a check that cannot fail without a bug (counter identities, a run that
    # completes, no hint fault with balancing off); any other check is a claim, a direction or
    # tolerance a source states. Referenced numbers are magnitudes (`magnitudes()`).
    kind: str = ""

    @property
    def check_kind(self) -> str:
        """"invariant", "claim", or "" (a plain measurement)."""
        if not self.check:
            return ""
        return "invariant" if self.kind == "invariant" else "claim"

    def magnitudes(self) -> dict:
        """{column: simulated / reference} for every referenced number with a nonzero
        reference (a magnitude: its error counts whatever the row's check says)."""
        out = {}
        for c, ref in self.reference.items():
            v = self.values.get(c)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not isinstance(ref, (int, float)):
                continue
            if ref != 0 and (v > 0) == (ref > 0) and v != 0:
                out[c] = v / ref
        return out

    def rel_error(self) -> dict:
        """{column: (simulated - reference) / |reference|} where both exist and the
        reference is not zero."""
        out = {}
        for c, ref in self.reference.items():
            v = self.values.get(c)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not isinstance(ref, (int, float)):
                continue
            if ref != 0:
                out[c] = (v - ref) / abs(ref)
        return out

    def to_dict(self) -> dict:
        d = {"metric": self.metric, "values": self.values, "check": self.check, "ok": self.ok,
             "kind": self.check_kind}
        if self.reference:
            d["reference"] = self.reference
            d["rel_error"] = self.rel_error()
        return d


@dataclass
class ExperimentResult:
    experiment: str
    columns: list
    rows: list

    @property
    def passed(self) -> bool:
        return all(r.ok for r in self.rows)

    def to_dict(self) -> dict:
        return {
            "experiment": self.experiment,
            "columns": list(self.columns),
            "rows": [r.to_dict() for r in self.rows],
            "pass": self.passed,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def to_table(self) -> str:
        head = ["metric", *self.columns, "check", "ok"]
        lines = []
        for r in self.rows:
            cells = [r.metric]
            for c in self.columns:
                cell = _fmt(r.values.get(c)) if c in r.values else ""
                if c in r.reference:
                    cell += f" (ref {_fmt(r.reference[c])})"
                cells.append(cell)
            cells += [r.check, ("ok" if r.ok else "FAIL") if r.check else ""]
            lines.append(cells)
        widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]
        fmt = "  ".join("{:<%d}" % w for w in widths)
        out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
        out += [fmt.format(*cells) for cells in lines]
        out.append(f"\n{self.experiment}: {'PASS' if self.passed else 'FAIL'}")
        return "\n".join(x.rstrip() for x in out)


def _fmt(v, compact: bool = False) -> str:
    """A table cell; ``compact`` writes very large or small floats as 3 significant digits."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if compact and v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.3g}"
        return f"{v:.1f}" if abs(v) >= 1000 else f"{v:.3f}"
    return str(v)


# ---------------------------------------------------------------- running


@dataclass
class RunOutcome:
    """A run's Result, or the error lines that stopped it."""

    result: Result | None = None
    error: str | None = None


def _run_one(toml_text: str):
    """Worker: ("ok", result JSON) or ("error", "Kind: message") (pool.run_one)."""
    from numasim.pool import run_one

    return run_one(toml_text)


def run_many(scenarios: dict, max_workers: int = 2, status=None) -> dict:
    """Run {key: scenario TOML} and return {key: RunOutcome}. Results do not
    depend on ``max_workers``: every run is a separate, seeded simulation. ``status``: a
    progress.RunsProgress that follows the runs."""
    from numasim.pool import run_scenarios

    raw = run_scenarios(scenarios, jobs=max_workers, status=status)
    out = {}
    for k in scenarios:
        status_, payload = raw[k]
        out[k] = RunOutcome(result=Result(payload)) if status_ == "ok" else RunOutcome(error=payload)
    return out


# ---------------------------------------------------------------- registry


class Experiment:
    """Base class: subclasses set name/description/columns and implement
    ``scenarios()`` ({key: TOML}) and ``evaluate(outcomes)`` (list of Row)."""

    name = ""
    description = ""
    columns: list = []

    def scenarios(self, overrides=None) -> dict:
        raise NotImplementedError

    def evaluate(self, outcomes: dict) -> list:
        raise NotImplementedError

    def run(self, max_workers: int = 2, overrides=None, status=None) -> ExperimentResult:
        """Run every scenario (``overrides``: dotted keys applied to each). ``status``: called
        with the scenario keys, returns a progress.RunsProgress to follow the runs (or None);
        it is closed when they end."""
        scenarios = self.scenarios(overrides)
        line = status(list(scenarios)) if status is not None else None
        try:
            outcomes = run_many(scenarios, max_workers=max_workers, status=line)
        finally:
            if line is not None:
                line.close()
        return ExperimentResult(self.name, list(self.columns), self.evaluate(outcomes))


REGISTRY: dict = {}


def register(cls):
    REGISTRY[cls.name] = cls()
    return cls


def get(name: str) -> Experiment:
    _load()
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown experiment {name!r}; known: {', '.join(sorted(REGISTRY))}") from None


def names() -> list:
    _load()
    return sorted(REGISTRY)


def _load() -> None:
    # Importing an experiment module registers it.
    from numasim.experiments import (  # noqa: F401
        autonuma_balancing,
        kvm_pinned,
        mthp_numa,
        tiering_hot_selection,
        tlb_flush,
        vma_flags_grouping,
    )

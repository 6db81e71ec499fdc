"""Sweep specs (docs/sweeps.md): a base scenario and axes over scenario keys, read from TOML
into points, each with its axis values, its scenario TOML and the hash of the resolved
scenario. Every point is resolved by the engine before anything runs."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

from numasim.scenario import UsageError, parse_toml, scenario_toml

# axis names that stand for a longer scenario key
ALIASES = {"kernel": "kernel.version", "machine": "machine.profile", "seed": "seed"}
BASE_KEYS = {"workload", "scenario", "experiment", "run", "machine", "balancing", "seed", "set"}
MAX_POINTS = 100_000


@dataclass
class Point:
    values: dict  # axis name -> value
    toml: str  # the scenario the engine runs
    scenario_hash: str  # SHA-256 of the resolved scenario
    key: str  # the point's id in a dataset: axis values + scenario hash + numasim version

    def label(self) -> str:
        """`delay_ms=100 kernel=6.1`: each axis by its last dotted part."""
        return " ".join(f"{a.rsplit('.', 1)[-1]}={v}" for a, v in self.values.items())


@dataclass
class Spec:
    where: str  # the spec file (or "spec"), for error locations
    base: str  # the base scenario's TOML
    axes: dict  # axis name -> [values] (crossed: the full grid)
    points: list  # listed points, [{axis: value}] (crossed with axes); [{}] if none
    extra: dict  # the spec's other tables ([tune], ...)

    @property
    def axis_names(self) -> list:
        names = list(self.points[0]) if self.points else []
        return names + [a for a in self.axes if a not in names]

    def combos(self) -> list:
        """Every point's axis values: the listed points crossed with the axes' grid."""
        grid = [dict(zip(self.axes, vs)) for vs in itertools.product(*self.axes.values())]
        return [{**p, **g} for p in self.points for g in grid]


def flatten(d: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}: unquoted dotted TOML keys back to --set paths."""
    out = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, name + "."))
        else:
            out[name] = v
    return out


def scenario_key(axis: str) -> str:
    return ALIASES.get(axis, axis)


def _kind(v) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "other"


def _check_values(where: str, name: str, values) -> list:
    if not isinstance(values, list) or not values:
        raise UsageError(f"{where}: {name}: give a non-empty list of values")
    kinds = {_kind(v) for v in values}
    if "other" in kinds or len(kinds) > 1:
        raise UsageError(f"{where}: {name}: values must be numbers, strings or booleans, all of one kind")
    if len({json.dumps(v) for v in values}) < len(values):
        raise UsageError(f"{where}: {name}: a value is listed twice")
    return values


def _base_toml(where: str, base: dict, spec_dir: Path) -> str:
    unknown = sorted(set(base) - BASE_KEYS)
    if unknown:
        raise UsageError(f"{where}: base.{unknown[0]}: unknown key (expected one of {', '.join(sorted(BASE_KEYS))})")
    sources = [k for k in ("workload", "scenario", "experiment") if k in base]
    if len(sources) != 1:
        raise UsageError(f"{where}: base: give one of workload, scenario or experiment")
    overrides = list(flatten(base.get("set", {})).items())
    kw = {"machine": base.get("machine"), "balancing": base.get("balancing"), "seed": base.get("seed")}
    if "workload" in base:
        kw["balancing"] = kw["balancing"] if kw["balancing"] is not None else "on"
        return scenario_toml(workload=base["workload"], overrides=overrides, **kw)
    if "scenario" in base:
        path = spec_dir / str(base["scenario"])
        return scenario_toml(path, overrides=overrides, **kw)
    return scenario_toml(_experiment_run(where, base), overrides=overrides, **kw)


def _experiment_run(where: str, base: dict) -> str:
    """The TOML of one run of a shipped experiment: base.run names it (`numa02-on`)."""
    from numasim import experiments

    try:
        exp = experiments.get(str(base["experiment"]))
    except KeyError as exc:
        raise UsageError(f"{where}: base.experiment: {exc.args[0]}") from None
    runs = {"-".join(map(str, k)) if isinstance(k, tuple) else str(k): t for k, t in exp.scenarios().items()}
    if base.get("run") not in runs:
        raise UsageError(f"{where}: base.run: give one of the experiment's runs: {', '.join(runs)}")
    return runs[base["run"]]


def _parse(text: str, where: str) -> dict:
    """The spec's TOML; a syntax error names the spec file."""
    from numasim.exceptions import NumasimError, error_list

    try:
        return parse_toml(text)
    except NumasimError as exc:
        raise UsageError(f"{where}: " + "; ".join(f"{e['loc']}: {e['msg']}" if e["loc"] else e["msg"]
                                                  for e in error_list(exc))) from None


def load_spec(source, where: str | None = None) -> Spec:
    """A Spec from a path, TOML text or dict; UsageError naming the spec and key if bad."""
    spec_dir = Path(".")
    if isinstance(source, dict):
        d, where = source, where or "spec"
    elif isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and source.endswith(".toml")):
        from numasim.textfile import read_text

        where, spec_dir = str(source), Path(source).parent
        d = _parse(read_text(source, "TOML"), where)
    else:
        where = where or "spec"
        d = _parse(source, where)
    if not isinstance(d.get("base"), dict):
        raise UsageError(f"{where}: base: missing; the [base] table names the scenario to sweep")
    base = _base_toml(where, d["base"], spec_dir)
    axes = {name: _check_values(where, f"axes.{name}", v) for name, v in flatten(d.get("axes", {})).items()}
    raw_points = d.get("points", [])
    if not isinstance(raw_points, list) or not all(isinstance(p, dict) for p in raw_points):
        raise UsageError(f"{where}: points: give [[points]] tables of axis values")
    points = [flatten(p) for p in raw_points] or [{}]
    names = list(points[0])
    for i, p in enumerate(points):
        if list(p) != names:
            raise UsageError(f"{where}: points[{i}]: every point must set the same keys, in the same order "
                             f"({', '.join(names) or 'none'})")
        for k, v in p.items():
            _check_values(where, f"points[{i}].{k}", [v])
        if p in points[:i]:
            raise UsageError(f"{where}: points[{i}]: the same point is listed twice")
    for k in names:
        if k in axes:
            raise UsageError(f"{where}: axes.{k}: also set by [[points]]; give it in one place")
    keys = [scenario_key(a) for a in names + list(axes)]
    if len(set(keys)) < len(keys):
        raise UsageError(f"{where}: axes: two axes set the same scenario key")
    spec = Spec(where, base, axes, points, {k: v for k, v in d.items() if k not in ("base", "axes", "points")})
    n = len(points) * math.prod(len(v) for v in axes.values())
    if n > MAX_POINTS:
        raise UsageError(f"{where}: {n} points; a sweep takes at most {MAX_POINTS}")
    return spec


def scenario_hash(toml_text: str) -> str:
    """SHA-256 of the resolved scenario (canonical JSON): equal for equal scenarios."""
    from numasim import _engine

    resolved = json.loads(_engine.resolve(toml_text))
    return hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()


def point_key(values: dict, shash: str) -> str:
    import numasim

    ident = json.dumps({"axes": values, "scenario": shash, "version": numasim.__version__}, sort_keys=True)
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def make_point(base: str, values: dict, where: str) -> Point:
    """The point's scenario (base + its axis values as overrides), resolved and hashed;
    a ScenarioError names the point."""
    from numasim.exceptions import NumasimError, error_list

    overrides = [(scenario_key(a), v) for a, v in values.items()]
    try:
        text = scenario_toml(base, overrides=overrides)
        shash = scenario_hash(text)
    except NumasimError as exc:
        label = " ".join(f"{a}={v}" for a, v in values.items())
        msgs = "; ".join(f"{e['loc']}: {e['msg']}" if e["loc"] else e["msg"] for e in error_list(exc))
        raise UsageError(f"{where}: point {label}: {msgs}") from None
    return Point(values, text, shash, point_key(values, shash))


def spec_points(spec: Spec) -> list:
    """Every point of the spec, in order (listed points, then the grid, last axis fastest)."""
    return [make_point(spec.base, values, spec.where) for values in spec.combos()]

"""numasim tune: search the scan sysctls (or other knobs) of a sweep spec's base scenario for
an objective under constraints, with Optuna's TPE sampler, running the trials on the sweep
runner (local processes or Dask). The default settings are the first trial, so the best
feasible trial is never worse than the default. Identical scenarios run once (a run is
deterministic)."""

from __future__ import annotations

import json
import math
import re

from numasim.scenario import UsageError
from numasim.sweep_spec import Spec, flatten, load_spec, make_point

SYSCTL = "kernel.sysctl.numa_balancing_"
DEFAULT_KNOBS = {  # the scan sysctls with ranges that contain their defaults (1000, 1000, 256)
    SYSCTL + "scan_delay_ms": [100, 10000],
    SYSCTL + "scan_period_min_ms": [100, 10000],
    SYSCTL + "scan_size_mb": [16, 1024],
}
CONSTRAINT = re.compile(r"^\s*(\w+)\s*(<=|>=)\s*(?:(default)\s*(?:([+-])\s*([0-9.]+)\s*%)?|([-+0-9.eE]+))\s*$")
TUNE_KEYS = {"minimize", "maximize", "constraints", "trials", "seeds", "sampler_seed", "knobs"}


def parse_constraint(text: str) -> tuple:
    """`elapsed_s <= default+2%` -> ("elapsed_s", "<=", bound(default figures) function)."""
    m = CONSTRAINT.match(str(text))
    if not m:
        raise UsageError(f"constraint {text!r}: write METRIC <= BOUND or METRIC >= BOUND, BOUND a number, "
                         "`default`, or `default+N%` / `default-N%`")
    metric, op, dflt, sign, pct, number = m.groups()
    if dflt:
        f = (1 + (float(pct) / 100) * (1 if sign == "+" else -1)) if pct else 1.0
        return metric, op, (lambda d, metric=metric, f=f: d[metric] * f)
    return metric, op, (lambda d, v=float(number): v)


def _knobs(where: str, raw: dict) -> dict:
    out = {}
    for k, v in flatten(raw).items():
        ok = isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                         for x in v) and v[0] < v[1]
        if not ok:
            raise UsageError(f"{where}: tune.knobs.{k}: give a range [low, high] of numbers, low < high")
        out[k] = v
    return out


def _suggest(trial, name: str, lo_hi: list):
    lo, hi = lo_hi
    log = lo > 0 and hi / lo >= 20
    if isinstance(lo, int) and isinstance(hi, int):
        return trial.suggest_int(name, lo, hi, log=log)
    return trial.suggest_float(name, float(lo), float(hi), log=log)


def _lookup(d: dict, path: str):
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def settings(spec: Spec, minimize=None, maximize=None, constraints=None, trials=None, seeds=None,
             sampler_seed=None) -> dict:
    """The search: the spec's [tune] table, overridden by the arguments given."""
    t = dict(spec.extra.get("tune", {}))
    unknown = sorted(set(t) - TUNE_KEYS)
    if unknown:
        raise UsageError(f"{spec.where}: tune.{unknown[0]}: unknown key (expected one of {', '.join(sorted(TUNE_KEYS))})")
    if minimize or maximize:
        t.pop("minimize", None), t.pop("maximize", None)
    t.update({k: v for k, v in dict(minimize=minimize, maximize=maximize, constraints=constraints, trials=trials,
                                        seeds=seeds, sampler_seed=sampler_seed).items() if v is not None})
    if bool(t.get("minimize")) == bool(t.get("maximize")):
        raise UsageError("give one objective: --minimize METRIC or --maximize METRIC (or tune.minimize)")
    if spec.axes or spec.points != [{}]:
        raise UsageError(f"{spec.where}: tune searches the base scenario: remove [axes] and [[points]] "
                         "(the seeds are tune.seeds)")
    trials = t.get("trials", 20)
    if not isinstance(trials, int) or not 1 <= trials <= 10_000:
        raise UsageError(f"trials must be in 1..10000, got {trials}")
    seeds = t.get("seeds", [1])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise UsageError(f"seeds must be a non-empty list of integers, got {seeds!r}")
    return {"objective": t.get("minimize") or t.get("maximize"), "direction": "minimize" if t.get("minimize") else "maximize",
            "constraints": [str(c) for c in t.get("constraints", [])], "trials": trials, "seeds": seeds,
            "sampler_seed": int(t.get("sampler_seed", 1)), "knobs": _knobs(spec.where, t.get("knobs", {})) or DEFAULT_KNOBS}


class _Runs:
    """Runs points on a runner, each distinct scenario once; metrics per scenario hash."""

    def __init__(self, runner):
        self.runner, self.rows, self.errors = runner, {}, {}

    def run(self, points: list) -> None:
        from numasim import sweep_data

        todo = {p.scenario_hash: p for p in points if p.scenario_hash not in self.rows and p.scenario_hash not in self.errors}

        def on_result(h, pair):
            if pair[0] == "ok":
                self.rows[h] = sweep_data.make_row(todo[h], pair[1])
            else:
                self.errors[h] = pair[1]

        if todo:
            self.runner.run({h: p.toml for h, p in todo.items()}, on_result=on_result)

    def figures(self, points: list, metrics: list):
        """{metric: mean over the points}, completed (all of them), error (or None)."""
        err = next((self.errors[p.scenario_hash] for p in points if p.scenario_hash in self.errors), None)
        if err:
            return None, False, err
        rows = [self.rows[p.scenario_hash] for p in points]
        for m in metrics:
            if m not in rows[0] or isinstance(rows[0][m], (bool, str)):
                raise UsageError(f"{m}: not a metric of a run (elapsed_s, system_s, user_s, hint_local_pct, "
                                 "a /proc/vmstat counter)")
        return ({m: sum(float(r[m]) for r in rows) / len(rows) for m in metrics},
                all(r["completed"] for r in rows), None)


def tune(spec, *, minimize=None, maximize=None, constraints=None, trials=None, seeds=None, sampler_seed=None,
         dask=None, jobs=None, status=None) -> dict:
    """Search the knobs; return {"default": ..., "best": ..., "trials": [...], ...} (JSON-able).
    ``status``: called with the trial numbers, returns a progress.RunsProgress-like object."""
    from numasim.executor import require, runner

    optuna = require("optuna", "numasim tune")
    spec = spec if isinstance(spec, Spec) else load_spec(spec)
    s = settings(spec, minimize, maximize, constraints, trials, seeds, sampler_seed)
    cons = [parse_constraint(c) for c in s["constraints"]]
    metrics = list(dict.fromkeys([s["objective"]] + [c[0] for c in cons]))
    knobs = s["knobs"]

    def points(params: dict) -> list:
        return [make_point(spec.base, {**params, "seed": seed}, spec.where) for seed in s["seeds"]]

    from numasim import _engine

    resolved = json.loads(_engine.resolve(spec.base))
    default_params = {k: _lookup(resolved, k) for k in knobs}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=s["sampler_seed"])
    study = optuna.create_study(direction=s["direction"], sampler=sampler)
    in_range = all(isinstance(v, (int, float)) and lo <= v <= hi for v, (lo, hi) in zip(default_params.values(), knobs.values()))
    if in_range:
        study.enqueue_trial(default_params)
    st = status(list(range(s["trials"]))) if status is not None else None
    if st is not None and hasattr(st, "labels"):
        st.labels.update({i: f"trial {i}" for i in range(s["trials"])})
    records = []
    try:
        with runner(dask, jobs) as r:
            runs = _Runs(r)
            base_points = points({})
            runs.run(base_points)
            default, complete, err = runs.figures(base_points, metrics)
            if err:
                raise UsageError(f"the default settings fail: {err}")
            if not complete:
                raise UsageError("the default settings' runs stop at run.max_sim_s before their workloads finish: "
                                 "raise run.max_sim_s")
            bounds = [(m, op, f(default)) for m, op, f in cons]
            batch = max(1, r.jobs if hasattr(r, "jobs") else 2)
            while len(records) < s["trials"]:
                asked = [study.ask() for _ in range(min(batch, s["trials"] - len(records)))]
                planned = []
                for t in asked:
                    params = {k: _suggest(t, k, v) for k, v in knobs.items()}
                    if st is not None:
                        st.start(t.number)
                    try:
                        planned.append((t, params, points(params)))
                    except UsageError as exc:  # e.g. scan_period_max below scan_period_min
                        planned.append((t, params, str(exc)))
                runs.run([p for _, _, pts in planned if not isinstance(pts, str) for p in pts])
                for t, params, pts in planned:
                    records.append(_tell(study, t, params, pts, runs, metrics, bounds, s))
                    if st is not None:
                        st.finish(t.number)
    finally:
        if st is not None and hasattr(st, "close"):
            st.close()
    feasible = [x for x in records if x["feasible"]]
    sign = 1 if s["direction"] == "minimize" else -1
    best = min(feasible, key=lambda x: (sign * x["metrics"][s["objective"]], x["trial"])) if feasible else None
    return {"objective": s["objective"], "direction": s["direction"], "constraints": s["constraints"],
            "bounds": {f"{m} {op}": b for m, op, b in bounds}, "seeds": s["seeds"], "knobs": knobs,
            "default": {"params": default_params, "metrics": default}, "best": best,
            "trials": records, "default_is_trial": in_range}


def _tell(study, t, params, pts, runs, metrics, bounds, s) -> dict:
    """Tell Optuna one trial's outcome; its record."""
    import optuna

    rec = {"trial": t.number, "params": params, "metrics": None, "completed": False, "feasible": False, "error": None}
    if isinstance(pts, str):
        figures, complete, err = None, False, pts
    else:
        figures, complete, err = runs.figures(pts, metrics)
    if err:
        rec["error"] = err
        study.tell(t, state=optuna.trial.TrialState.FAIL)
        return rec
    violation = {f"{m} {op} {b:g}": (figures[m] - b) if op == "<=" else (b - figures[m]) for m, op, b in bounds}
    violation["completed"] = 0.0 if complete else 1.0  # an incomplete run is never a candidate
    for name, v in violation.items():
        t.set_constraint(name, float(v) if math.isfinite(v) else 1.0)
    rec.update(metrics=figures, completed=complete, feasible=all(v <= 0 for v in violation.values()))
    value = figures[s["objective"]]
    study.tell(t, value if math.isfinite(value) else None,
               state=None if math.isfinite(value) else optuna.trial.TrialState.FAIL)
    return rec

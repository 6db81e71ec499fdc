"""`numasim reproduce all`: every shipped experiment, each metric's changelog value beside
the simulated one, the relative error, and the experiment's own tolerance; then how many
experiments (and checks) hold."""

from __future__ import annotations

import json
import time

from numasim.experiments import registry


def _fmt(v) -> str:
    return registry._fmt(v, compact=True)


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _err(v, ref, e) -> str:
    """The relative error, and ">2x" where the simulated magnitude is more than a factor 2
    from the changelog's, whatever the row's check says."""
    out = _pct(e)
    num = isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(ref, (int, float))
    if num and ref and (v == 0 or (v > 0) != (ref > 0) or not 0.5 <= v / ref <= 2.0):
        out += " >2x"
    return out


def lines_of(res) -> list:
    """[(metric, column, simulated, reference, rel_error, tolerance, verdict)] of one
    ExperimentResult: a line per referenced (metric, column), and a line per column of a
    check that has no reference; a row's tolerance and verdict are on its first line. Plain
    measurements (no reference, no check) are left out."""
    out = []
    for r in res.rows:
        verdict = ("ok" if r.ok else "FAIL") if r.check else ""
        if r.check_kind == "invariant":
            verdict += " (invariant)"
        if r.reference:
            err = r.rel_error()
            for i, (c, ref) in enumerate(r.reference.items()):  # the row's check once, on its first line
                out.append((r.metric, c, r.values.get(c), ref, err.get(c),
                            r.check if i == 0 else "", verdict if i == 0 else ""))
        elif r.check:
            cols = [c for c in res.columns if c in r.values] or [""]
            for i, c in enumerate(cols):
                out.append((r.metric, c, r.values.get(c) if c else None, None, None,
                            r.check if i == 0 else "", verdict if i == 0 else ""))
    return out


def table(res) -> str:
    head = ["metric", "column", "simulated", "changelog", "rel. error", "tolerance", "ok"]
    rows = [[m, c, _fmt(v), _fmt(ref) if ref is not None else "", _err(v, ref, e) if ref is not None else "", tol, ok]
            for m, c, v, ref, e, tol, ok in lines_of(res)]
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*r) for r in rows]
    plain = sum(1 for r in res.rows if not r.reference and not r.check)
    tail = f"{res.experiment}: {'PASS' if res.passed else 'FAIL'}"
    if plain:
        tail += f" ({plain} plain measurement rows not shown; `numasim reproduce {res.experiment}` lists them)"
    out += ["", tail]
    return "\n".join(x.rstrip() for x in out)


def counts(results: list) -> dict:
    """Experiments that hold; claims (a source's direction or tolerance: "checks" counts only
    these), invariants (cannot fail without a bug) and referenced magnitudes, kept apart."""
    rows = [r for res in results for r in res.rows]
    claims = [r for r in rows if r.check_kind == "claim"]
    invariants = [r for r in rows if r.check_kind == "invariant"]
    ratios = [x for r in rows for x in r.magnitudes().values()]
    return {
        "experiments": len(results),
        "experiments_hold": sum(1 for res in results if res.passed),
        "checks": len(claims),
        "checks_hold": sum(1 for r in claims if r.ok),
        "invariants": len(invariants),
        "invariants_hold": sum(1 for r in invariants if r.ok),
        "magnitudes": len(ratios),
        "magnitudes_within_25pct": sum(1 for x in ratios if 0.75 <= x <= 1.25),
        "magnitudes_within_2x": sum(1 for x in ratios if 0.5 <= x <= 2.0),
    }


def summary_line(results: list) -> str:
    n = counts(results)
    line = (f"reproduce all: {n['experiments_hold']} of {n['experiments']} experiments hold their "
            f"tolerance ({n['checks_hold']} of {n['checks']} claims")
    if n["invariants"]:
        line += f"; {n['invariants_hold']} of {n['invariants']} invariants"
    if n["magnitudes"]:
        line += (f"; {n['magnitudes_within_2x']} of {n['magnitudes']} referenced magnitudes within 2x, "
                 f"{n['magnitudes_within_25pct']} within ±25%")
    return line + ")"


def run_all(max_workers: int = 2, overrides=None, on_start=None, on_done=None, status=None) -> list:
    """Run every registered experiment in name order; returns their ExperimentResults.
    ``on_start(name)`` / ``on_done(name, result, wall_s)`` report progress; ``status(name)``
    gives the experiment's status factory (Experiment.run), or None."""
    results = []
    for name in registry.names():
        exp = registry.get(name)
        if on_start:
            on_start(name)
        t0 = time.perf_counter()
        res = exp.run(max_workers=max_workers, overrides=overrides, status=status(name) if status else None)
        if on_done:
            on_done(name, res, time.perf_counter() - t0)
        results.append(res)
    return results


def experiment_iterations(exp, iterations: int, max_workers: int = 2, overrides=None,
                          first_seed: int = 1, on_done=None, status=None):
    """Run experiment ``exp`` ``iterations`` times with every scenario's seed set to
    first_seed, first_seed+1, ... (the shipped experiments use seed 1, so the first
    iteration is the standard run). Returns one ExperimentResult whose values are the means
    over the iterations and whose checks must hold in every iteration. ``status(i)`` gives
    iteration i's status factory (Experiment.run), or None."""
    from numasim.experiments.registry import ExperimentResult, Row

    from numasim.repeat import check_iterations

    check_iterations(iterations)
    runs = []
    for i in range(iterations):
        ov = list(overrides.items() if isinstance(overrides, dict) else (overrides or []))
        runs.append(exp.run(max_workers=max_workers, overrides=ov + [("seed", first_seed + i)],
                            status=status(i + 1) if status else None))
        if on_done:
            on_done(i + 1, iterations)
    rows = []
    for k, row in enumerate(runs[0].rows):
        same = [r.rows[k] for r in runs if k < len(r.rows) and r.rows[k].metric == row.metric]
        values = {}
        for c in row.values:
            xs = [r.values.get(c) for r in same]
            nums = [x for x in xs if isinstance(x, (int, float)) and not isinstance(x, bool)]
            values[c] = sum(nums) / len(nums) if nums and len(nums) == len(xs) else None
        held = sum(1 for r in same if r.ok)
        check = row.check
        if check:
            check += f" [mean of {iterations} seeds; held in {held} of {len(same)}]"
        rows.append(Row(row.metric, values, reference=dict(row.reference), check=check,
                        ok=held == len(same) == iterations, kind=row.kind))
    return ExperimentResult(f"{exp.name} x{iterations}", list(runs[0].columns), rows)


def to_json(results: list) -> str:
    return json.dumps({"experiments": [r.to_dict() for r in results], "summary": counts(results)}, indent=1)


def to_text(results: list) -> str:
    blocks = [f"== {res.experiment}\n{table(res)}" for res in results]
    return "\n\n".join(blocks + [summary_line(results)])

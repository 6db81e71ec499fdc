"""numasim.sweep(): run every point of a sweep spec (sweep_spec.py) on local processes or a
Dask cluster (executor.py), appending a row per finished point to a Parquet dataset
(sweep_data.py). Points already in the dataset are not run again, so an interrupted sweep
resumes where it stopped."""

from __future__ import annotations

from numasim import sweep_data
from numasim.exceptions import NumasimError
from numasim.scenario import UsageError
from numasim.sweep_spec import Spec, load_spec, spec_points


class SweepError(NumasimError):
    """Some points failed (each in ``errors``); the others' rows were written."""


def plan(spec, out=None):
    """(Spec, every Point, the Points still to run): UsageError if the dataset ``out`` holds
    rows that are not points of this spec."""
    spec = spec if isinstance(spec, Spec) else load_spec(spec)
    points = spec_points(spec)
    done = sweep_data.done_keys(out) if out is not None else set()
    foreign = done - {p.key for p in points}
    if foreign:
        raise UsageError(f"{out}: holds {len(foreign)} rows that are not points of this spec (its base, axes or "
                         "the numasim version changed since they were run): give another output directory")
    return spec, points, [p for p in points if p.key not in done]


def sweep(spec, out=None, *, dask: str | None = None, jobs: int | None = None, status=None):
    """Run the sweep ``spec`` (a path, TOML text or dict) and return its DataFrame: one row per
    point, in the spec's order. ``out``: the dataset directory, appended to as points finish;
    points it already holds are not run again. ``dask``: a scheduler address, or "local" for a
    LocalCluster of ``jobs`` processes; else ``jobs`` local processes (default 2). ``status``:
    called with the keys of the points to run, returns a progress.RunsProgress-like object.
    Failed points raise a SweepError at the end, after the others were run and saved."""
    import pandas as pd

    from numasim.executor import runner

    spec, points, todo = plan(spec, out)
    by_key = {p.key: p for p in points}
    rows, errors = {}, []

    def on_result(key, pair):
        state, payload = pair
        if state != "ok":
            errors.append({"loc": f"point {by_key[key].label()}", "kind": payload.partition(":")[0],
                           "msg": payload.partition(": ")[2]})
            return
        rows[key] = sweep_data.make_row(by_key[key], payload)
        if out is not None:
            sweep_data.write_row(out, rows[key], spec.axis_names)

    st = status([p.key for p in todo]) if status is not None and todo else None
    if st is not None and hasattr(st, "labels"):
        st.labels.update({p.key: p.label() for p in todo})
    try:
        if todo:
            with runner(dask, jobs) as r:
                r.run({p.key: p.toml for p in todo}, status=st, on_result=on_result)
    finally:
        if st is not None and hasattr(st, "close"):
            st.close()
    if errors:
        exc = SweepError("; ".join(f"{e['loc']}: {e['msg']}" for e in errors))
        exc.errors = errors
        raise exc
    if out is not None:
        return sweep_data.read(out, order=[p.key for p in points])
    return pd.DataFrame([rows[p.key] for p in points])

"""A sweep's dataset: a directory of Parquet files, `run-<key>.parquet`, one tidy row per
finished point (its axis values, completed, times, counters, the resolved scenario's hash,
the numasim version, the point's key). Each file is written under a temporary name and
renamed into place, so an interrupted sweep leaves only whole rows, and the file names say
which points are done. `pandas.read_parquet(DIR)` reads the dataset; read() orders it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from numasim.scenario import UsageError

META_KEY = b"numasim.sweep"  # Parquet schema metadata: {"axes": [...]}
PREFIX, SUFFIX = "run-", ".parquet"
TAIL = ["scenario_hash", "numasim_version", "point"]


def fragment(directory, key: str) -> Path:
    return Path(directory) / f"{PREFIX}{key}{SUFFIX}"


def done_keys(directory) -> set:
    """Keys of the points a dataset holds (none if it does not exist yet)."""
    d = Path(directory)
    if not d.is_dir():
        return set()
    return {p.name[len(PREFIX):-len(SUFFIX)] for p in d.glob(f"{PREFIX}*{SUFFIX}")}


def make_row(point, result_json: str) -> dict:
    """A point's tidy row from its result JSON."""
    import numasim
    from numasim.result import Result

    r = Result(result_json)
    clash = set(point.values) & (set(r.times) | set(r.counters) | {"completed", "hint_local_pct", *TAIL})
    if clash:
        raise UsageError(f"axis {sorted(clash)[0]}: has the name of a result column; rename the axis")
    row = dict(point.values)
    row["completed"] = bool(r.completed)
    row.update({k: float(v) for k, v in r.times.items()})
    row["hint_local_pct"] = float(r.hint_local_percent())
    row.update({k: int(v) for k, v in r.counters.items()})
    row.update(scenario_hash=point.scenario_hash, numasim_version=numasim.__version__, point=point.key)
    return row


def write_row(directory, row: dict, axes: list) -> Path:
    """Write one row as its point's file (temporary name, then renamed into place)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    final = fragment(d, row["point"])
    tmp = d / f".{final.name}.tmp-{os.getpid()}"
    table = pa.Table.from_pandas(pd.DataFrame([row]), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[META_KEY] = json.dumps({"axes": axes}).encode()
    try:
        pq.write_table(table.replace_schema_metadata(meta), tmp)
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final


def axes_of(directory) -> list:
    """The axis names a dataset records (those of its first file)."""
    import pyarrow.parquet as pq

    files = sorted(Path(directory).glob(f"{PREFIX}*{SUFFIX}"))
    if not files:
        return []
    meta = pq.read_schema(files[0]).metadata or {}
    return json.loads(meta.get(META_KEY, b'{"axes": []}'))["axes"]


def read(directory, order: list | None = None):
    """The dataset as one DataFrame: rows in ``order`` (point keys) if given, else sorted by
    the axes. UsageError if it is not a sweep dataset."""
    import pandas as pd

    d = Path(directory)
    if not d.is_dir():
        raise UsageError(f"{d}: no such sweep dataset (a directory of {PREFIX}*{SUFFIX} files)")
    files = sorted(d.glob(f"{PREFIX}*{SUFFIX}"))
    if not files:
        raise UsageError(f"{d}: no sweep results in this directory")
    try:
        df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    except Exception as exc:  # pyarrow raises several kinds for a damaged file
        raise UsageError(f"{d}: unreadable sweep dataset ({exc})") from None
    if order is not None:
        rank = {k: i for i, k in enumerate(order)}
        df = df.assign(_rank=df["point"].map(rank)).sort_values("_rank", kind="stable").drop(columns="_rank")
    else:
        axes = [a for a in axes_of(d) if a in df.columns]
        df = df.sort_values(axes + ["point"], kind="stable") if axes else df.sort_values("point")
    return df.reset_index(drop=True)

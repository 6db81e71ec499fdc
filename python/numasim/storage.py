"""Results on disk (docs/results.md).

One run is ``NAME.json``, the engine's result JSON exactly as returned (scenario,
counters, times, time series), with Parquet sidecars for pandas users:
``NAME.vmstat.parquet`` (cumulative counters indexed by time_s),
``NAME.memory.parquet`` (resident pages and MiB per time_s, pid, node), and, when the result has
those series, ``NAME.tasks.parquet`` (time_s, tid, pid, cpu_node, preferred_nid) and
``NAME.placement.parquet`` (time_s, pid, bucket, node, pages). The JSON alone is enough
to read a result back. A run's id is the SHA-256 of its JSON text; each sidecar records it
in its Parquet metadata, and loading checks that the sidecars beside a JSON belong to it.

Saving writes every file under a temporary name first, then renames them into place (the
JSON last) with SIGINT and SIGTERM held back, so an interrupted save leaves either the old
files or the new ones.

A group of iterations of one configuration is a directory: ``iter-01.json``,
``iter-02.json``, ... (each with its sidecars) and ``scenario.toml``, the scenario
the iterations were run from (before each iteration's seed was set). Any directory
of result JSON files (searched recursively) is read as one group, so mmtests-style
layouts such as ``on/numa01/iter-01.json, on/numa02/iter-01.json`` form one column.
A JSON file in it that cannot be read or parsed is an error naming it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import warnings
from pathlib import Path

from numasim.compare import Column
from numasim.result import Result
from numasim.scenario import UsageError

SCENARIO_FILE = "scenario.toml"
RUN_ID_KEY = b"numasim.run_id"  # Parquet schema metadata of a sidecar: its result's run id


class ParquetSkippedWarning(UserWarning):
    """pyarrow is missing: a result was saved without its Parquet sidecars."""


def have_parquet() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


SIDECARS = ("vmstat", "memory", "tasks", "placement")


def sidecar_paths(json_path) -> dict:
    """{kind: NAME.<kind>.parquet} beside NAME.json, for vmstat, memory, tasks, placement."""
    p = Path(json_path)
    stem = p.name[:-5] if p.name.endswith(".json") else p.name
    return {kind: p.with_name(f"{stem}.{kind}.parquet") for kind in SIDECARS}


def series_frame(result: Result, kind: str):
    """The DataFrame a sidecar holds: ``vmstat`` indexed by time_s, the others long format;
    None when the result has no such series."""
    import pandas as pd

    if kind == "vmstat":
        return result.vmstat
    if kind == "memory":
        return result.memory
    s = result.raw.get("series", {}).get(kind)
    if s is None:
        return None
    return pd.DataFrame({k: v for k, v in s.items() if isinstance(v, list)})


def sidecar_run_id(path) -> str | None:
    """The run id a sidecar records (None: written without one)."""
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    rid = meta.get(RUN_ID_KEY)
    return rid.decode("ascii", "replace") if rid is not None else None


def check_sidecars(json_path, result: Result) -> None:
    """UsageError if a sidecar beside ``json_path`` belongs to another run than ``result``
    (e.g. an interrupted save, or files copied from elsewhere)."""
    if not have_parquet():
        return
    for side in sidecar_paths(json_path).values():
        if not side.exists():
            continue
        try:
            rid = sidecar_run_id(side)
        except Exception as exc:  # pyarrow raises several kinds for a damaged file
            raise UsageError(f"{side}: unreadable Parquet sidecar ({exc})") from None
        if rid != result.run_id:
            why = "records no run id" if rid is None else f"belongs to run {rid}"
            raise UsageError(f"{side}: {why}, not to {Path(json_path).name} (run {result.run_id}); "
                             "the save was interrupted or the files were mixed: save the run again "
                             "or delete the sidecars")


def read_sidecar(json_path, kind: str):
    """pandas.read_parquet of NAME.<kind>.parquet, after checking it belongs to NAME.json."""
    import pandas as pd

    check_sidecars(json_path, load_result(json_path, check=False))
    return pd.read_parquet(sidecar_paths(json_path)[kind])


@contextlib.contextmanager
def _signals_held():
    """Hold SIGINT and SIGTERM back (they are delivered on exit), so a few renames finish
    together. A no-op outside the main thread or where pthread_sigmask is missing."""
    mask = {signal.SIGINT, signal.SIGTERM}
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, mask)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _write_parquet(df, path: Path, run_id: str, index: bool) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=index)
    meta = dict(table.schema.metadata or {})
    meta[RUN_ID_KEY] = run_id.encode("ascii")
    pq.write_table(table.replace_schema_metadata(meta), path)


def _stage_result(result: Result, path: Path, parquet: bool, staged: list) -> None:
    """Write the result's files under temporary names, adding (temporary, final) to
    ``staged``, JSON last. Sidecars of kinds the result lacks get (None, final): the old file
    is removed."""
    if parquet:
        for kind, side in sidecar_paths(path).items():
            df = series_frame(result, kind)
            if df is None:
                staged.append((None, side))
                continue
            tmp = _tmp_name(side)
            staged.append((tmp, side))
            _write_parquet(df, tmp, result.run_id, index=(kind == "vmstat"))
    else:
        staged += [(None, side) for side in sidecar_paths(path).values()]
    tmp = _tmp_name(path)
    staged.append((tmp, path))
    tmp.write_text(result.json_text, encoding="utf-8")


def _commit(staged: list) -> None:
    """Rename staged files into place in order (stale sidecars removed), signals held."""
    with _signals_held():
        for tmp, final in staged:
            if tmp is None:
                final.unlink(missing_ok=True)
            else:
                os.replace(tmp, final)


def _discard(staged: list) -> None:
    for tmp, _ in staged:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def _parquet_or_warn(parquet: bool | None, what) -> bool:
    if parquet is not None:
        return parquet
    if have_parquet():
        return True
    warnings.warn(f"pyarrow is not installed: saved {what} without the Parquet sidecars "
                  "(pip install pyarrow)", ParquetSkippedWarning, stacklevel=3)
    return False


def save_result(result: Result, path, parquet: bool | None = None) -> list:
    """Write ``path`` (the result JSON) and, when ``parquet`` (default: if pyarrow is
    installed, else a ParquetSkippedWarning), its Parquet sidecars; sidecars of an earlier
    save at ``path`` that this result does not have are removed. Returns the paths written."""
    path = Path(path)
    parquet = _parquet_or_warn(parquet, path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    staged = []
    try:
        _stage_result(result, path, parquet, staged)
        _commit(staged)
    finally:
        _discard(staged)
    return _written(staged)


def _written(staged: list) -> list:
    """The final paths of staged files, each JSON before its sidecars."""
    out, sidecars = [], []
    for tmp, final in staged:
        if tmp is None:
            continue
        if final.suffix == ".parquet":
            sidecars.append(final)
        else:
            out += [final] + sidecars
            sidecars = []
    return out + sidecars


def save_iterations(results: list, directory, scenario_text: str | None = None,
                    parquet: bool | None = None) -> list:
    """Write a group: ``directory/iter-NN.json`` (+ sidecars) per result and
    ``directory/scenario.toml``. Every file is written under a temporary name first; then the
    previous group's ``iter-*`` files are removed and the new ones renamed into place, with
    SIGINT and SIGTERM held back, so the directory never holds part of one group and part of
    another. Returns the paths written."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    parquet = _parquet_or_warn(parquet, d)
    width = max(2, len(str(len(results))))
    staged = []
    try:
        for i, r in enumerate(results, 1):
            _stage_result(r, d / f"iter-{i:0{width}d}.json", parquet, staged)
        if scenario_text is not None:
            tmp = _tmp_name(d / SCENARIO_FILE)
            tmp.write_text(scenario_text, encoding="utf-8")
            staged.append((tmp, d / SCENARIO_FILE))
        new = {final for _, final in staged}
        old = [p for p in list(d.glob("iter-*.json")) + list(d.glob("iter-*.parquet")) if p not in new]
        _commit([(None, p) for p in old] + staged)
    finally:
        _discard(staged)
    return _written(staged)


def _is_result(obj) -> bool:
    return isinstance(obj, dict) and "counters" in obj and "times" in obj and "series" in obj


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def shape_problem(obj: dict) -> str:
    """What keeps a result-like JSON from being read as a result ("" if nothing): the parts
    compare, plot and report rely on."""
    if not isinstance(obj["counters"], dict) or not all(_number(v) for v in obj["counters"].values()):
        return "counters is not a map of numbers"
    times = obj["times"]
    for k in ("elapsed_s", "user_s", "system_s"):
        if not isinstance(times, dict) or not _number(times.get(k)):
            return f"times.{k} is missing or not a number"
    series = obj["series"]
    need = {"vmstat": ("time_s",), "memory": ("time_s", "pid", "node", "pages")}
    for name, cols in need.items():
        s = series.get(name) if isinstance(series, dict) else None
        if not isinstance(s, dict) or not all(isinstance(s.get(c), list) for c in cols):
            return f"series.{name} lacks the columns {', '.join(cols)}"
        lengths = {len(v) for v in s.values() if isinstance(v, list)}
        if len(lengths) > 1:
            return f"series.{name} has columns of different lengths"
    for k, kind in (("scenario", dict), ("processes", list)):
        if k in obj and not isinstance(obj[k], kind):
            return f"{k} is not a {kind.__name__}"
    return ""


def _read_json(path: Path):
    """(text, parsed JSON) of a file; UsageError naming it if it cannot be read or parsed."""
    from numasim.textfile import bad_byte

    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not a numasim result (not UTF-8: {bad_byte(exc)})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return text, json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not a numasim result (invalid JSON: {exc.msg} at line {exc.lineno}, "
                         f"column {exc.colno}; truncated?)") from None


def load_result(path, check: bool = True) -> Result:
    """Read one result JSON; UsageError if it is not one or (``check``) if a sidecar beside
    it belongs to another run."""
    path = Path(path)
    text, obj = _read_json(path)
    if not _is_result(obj):
        raise UsageError(f"{path}: not a numasim result (no counters/times/series)")
    problem = shape_problem(obj)
    if problem:
        raise UsageError(f"{path}: not a numasim result ({problem})")
    result = Result(text)
    if check:
        check_sidecars(path, result)
    return result


def result_files(path) -> list:
    """The result JSON files of ``path``: itself, or every result JSON under a directory.
    In a directory, JSON files that parse but are not results are left out; one that cannot be
    read or parsed (e.g. a truncated result) is a UsageError naming it."""
    p = Path(path)
    if p.is_dir():
        files = []
        for f in sorted(p.rglob("*.json")):
            if _is_result(_read_json(f)[1]):
                files.append(f)
        if not files:
            raise UsageError(f"{p}: no numasim result JSON files in this directory")
        return files
    if not p.exists():
        raise FileNotFoundError(2, "no such file", str(p))
    return [p]


def load_group(path) -> list:
    """[(file, Result)] of one saved result or a directory of them."""
    return [(f, load_result(f)) for f in result_files(path)]


def read_scenario_text(path) -> str | None:
    """The group's scenario.toml, if ``path`` is a directory holding one."""
    p = Path(path)
    from numasim.textfile import read_text

    f = p / SCENARIO_FILE if p.is_dir() else None
    return read_text(f, "TOML") if f is not None and f.exists() else None


def _stem(path: Path) -> str:
    return path.name[:-5] if path.name.endswith(".json") else path.name


def load_columns(specs: list) -> list:
    """Columns from command-line specs: ``PATH`` or ``NAME=PATH``. A column's name defaults
    to the file or directory stem; stems that collide are lengthened with parent folders."""
    parsed = []
    for spec in specs:
        name, sep, path = str(spec).partition("=")
        if not sep or not name or Path(spec).exists():
            name, path = None, str(spec)
        parsed.append((name, Path(path)))
    names = [n or _stem(p.resolve()) for n, p in parsed]
    depth = 1
    while len(set(names)) < len(names) and depth < 6:
        depth += 1
        names = [n or "/".join(p.resolve().parts[-depth:])[:-5 if p.suffix == ".json" else None]
                 for n, p in parsed]
    if len(set(names)) < len(names):
        raise UsageError("two columns have the same name; name them with NAME=PATH")
    cols = []
    for name, (_, p) in zip(names, parsed):
        group = load_group(p)
        cols.append(Column(name, [r for _, r in group], sources=[f for f, _ in group],
                           scenario_text=read_scenario_text(p)))
    return cols

"""Results on disk (docs/results.md).

One run is ``NAME.json``, the engine's result JSON exactly as returned (scenario,
counters, times, time series), with Parquet sidecars for pandas users:
``NAME.vmstat.parquet`` (cumulative counters indexed by time_s),
``NAME.memory.parquet`` (resident pages per time_s, pid, node), and, when the result has
those series, ``NAME.tasks.parquet`` (time_s, tid, pid, cpu_node, preferred_nid) and
``NAME.placement.parquet`` (time_s, pid, bucket, node, pages). The JSON alone is enough
to read a result back; the sidecars are written when pyarrow is installed.

A group of iterations of one configuration is a directory: ``iter-01.json``,
``iter-02.json``, ... (each with its sidecars) and ``scenario.toml``, the scenario
the iterations were run from (before each iteration's seed was set). Any directory
of result JSON files (searched recursively) is read as one group, so mmtests-style
layouts such as ``on/numa01/iter-01.json, on/numa02/iter-01.json`` form one column.
"""

from __future__ import annotations

import json
from pathlib import Path

from numasim.compare import Column
from numasim.result import Result
from numasim.scenario import UsageError

SCENARIO_FILE = "scenario.toml"


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


def read_sidecar(json_path, kind: str):
    """pandas.read_parquet of NAME.<kind>.parquet."""
    import pandas as pd

    return pd.read_parquet(sidecar_paths(json_path)[kind])


def save_result(result: Result, path, parquet: bool | None = None) -> list:
    """Write ``path`` (the result JSON) and, when ``parquet`` (default: if pyarrow is
    installed), its two Parquet sidecars. Returns the paths written."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    result.save(path)
    written = [path]
    if parquet is None:
        parquet = have_parquet()
    if parquet:
        for kind, side in sidecar_paths(path).items():
            df = series_frame(result, kind)
            if df is None:
                continue
            df.to_parquet(side, index=(kind == "vmstat"))
            written.append(side)
    return written


def save_iterations(results: list, directory, scenario_text: str | None = None,
                    parquet: bool | None = None) -> list:
    """Write a group: ``directory/iter-NN.json`` (+ sidecars) per result and
    ``directory/scenario.toml``. A previous group's ``iter-*`` files in ``directory`` are
    removed first, so that none of them is read back as part of this one. Returns the
    paths written."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for old in list(d.glob("iter-*.json")) + list(d.glob("iter-*.parquet")):
        old.unlink()
    written = []
    width = max(2, len(str(len(results))))
    for i, r in enumerate(results, 1):
        written += save_result(r, d / f"iter-{i:0{width}d}.json", parquet=parquet)
    if scenario_text is not None:
        (d / SCENARIO_FILE).write_text(scenario_text, encoding="utf-8")
        written.append(d / SCENARIO_FILE)
    return written


def _is_result(obj) -> bool:
    return isinstance(obj, dict) and "counters" in obj and "times" in obj and "series" in obj


def load_result(path) -> Result:
    """Read one result JSON; UsageError if it is not one."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not a numasim result (invalid JSON: {exc.msg})") from None
    if not _is_result(obj):
        raise UsageError(f"{path}: not a numasim result (no counters/times/series)")
    return Result(text)


def result_files(path) -> list:
    """The result JSON files of ``path``: itself, or every result JSON under a directory."""
    p = Path(path)
    if p.is_dir():
        files = []
        for f in sorted(p.rglob("*.json")):
            try:
                obj = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            if _is_result(obj):
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
    f = p / SCENARIO_FILE if p.is_dir() else None
    return f.read_text(encoding="utf-8") if f is not None and f.exists() else None


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

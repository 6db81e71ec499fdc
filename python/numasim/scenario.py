"""Scenario sources: TOML files, TOML text, dicts, keyword shortcuts.

Python never validates a scenario: it only assembles TOML and hands it to the
engine, which resolves it (and reports every problem as a ScenarioError).
"""

from __future__ import annotations

import copy
import datetime
import json
import math
import os
import re
from pathlib import Path

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.9/3.10
    import tomli as tomllib

from numasim import _engine

DEFAULT_MACHINE = "xeon-platinum-2n-128c"

__all__ = [
    "DEFAULT_MACHINE",
    "UsageError",
    "load_scenario",
    "scenario_toml",
    "to_toml",
    "parse_set",
    "apply_overrides",
]


class UsageError(_engine.NumasimError, ValueError):
    """A shortcut, override, option or input file that cannot be used: a NumasimError (bad
    input), and a ValueError as before."""


# ---------------------------------------------------------------- reading


def _looks_like_path(s: str) -> bool:
    if "\n" in s or "=" in s or "[" in s:
        return False
    return s.endswith(".toml") or os.path.exists(s)


def read_source(source) -> str | dict:
    """Return TOML text, or a dict, for a path / TOML string / dict."""
    if isinstance(source, dict):
        return source
    if isinstance(source, Path) or (isinstance(source, str) and _looks_like_path(source)):
        from numasim.textfile import read_text

        return read_text(source, "TOML")  # FileNotFoundError is fine
    if isinstance(source, str):
        return source
    raise TypeError(f"scenario must be a path, TOML text or dict, not {type(source).__name__}")


def parse_toml(text: str) -> dict:
    """Parse TOML; on a syntax error, let the engine report it (toml_syntax)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        _engine.resolve(text)  # raises ScenarioError with loc/kind/msg
        raise UsageError(f"invalid TOML: {exc}") from exc  # engine disagreed


def load_scenario(source) -> dict:
    """The scenario as written (path, TOML text or dict), as a dict. Not resolved."""
    src = read_source(source)
    return dict(src) if isinstance(src, dict) else parse_toml(src)


# ---------------------------------------------------------------- writing

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k) -> str:
    k = str(k)
    return k if _BARE_KEY.match(k) else json.dumps(k)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # JSON escapes are valid TOML
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, (datetime.date, datetime.time)):  # TOML's dates and times (RFC 3339)
        return v.isoformat()
    if isinstance(v, dict):
        inner = ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items() if x is not None)
        return "{" + inner + "}"
    raise UsageError(f"cannot write {type(v).__name__} to TOML")


def _is_table_array(v) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, dict) for x in v)


def _emit(d: dict, prefix: list, out: list, keys: list, kpath: tuple = ()) -> None:
    """Append ``d``'s lines to ``out`` and, for each, its key path to ``keys`` (a tuple of
    names and array indices; None for a blank line)."""
    tables = []
    for k, v in d.items():
        if v is None:
            continue  # TOML has no null: leave the key to its default
        if isinstance(v, dict) or _is_table_array(v):
            tables.append((k, v))
        else:
            out.append(f"{_key(k)} = {_value(v)}")
            keys.append(kpath + (str(k),))
    for k, v in tables:
        path = prefix + [_key(k)]
        if isinstance(v, dict):
            out.append("")
            out.append("[" + ".".join(path) + "]")
            keys += [None, kpath + (str(k),)]
            _emit(v, path, out, keys, kpath + (str(k),))
        else:
            for i, item in enumerate(v):
                out.append("")
                out.append("[[" + ".".join(path) + "]]")
                keys += [None, kpath + (str(k), i)]
                _emit(item, path, out, keys, kpath + (str(k), i))


def to_toml_with_keys(d: dict) -> tuple:
    """(TOML text, key path of each line): to_toml, and where each line came from."""
    out: list = []
    keys: list = []
    _emit(d, [], out, keys)
    while out and out[0] == "":
        out.pop(0)
        keys.pop(0)
    return "\n".join(out) + "\n", keys


def to_toml(d: dict) -> str:
    """A small TOML writer: tables, arrays of tables, scalars and arrays."""
    return to_toml_with_keys(d)[0]


# ---------------------------------------------------------------- overrides


def parse_value(text: str):
    """A TOML value (`64`, `true`, `[[10,21],[21,10]]`, `"x"`), else a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_set(expr: str):
    """`a.b.c=value` -> ("a.b.c", value)."""
    key, sep, val = expr.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(f"--set expects KEY=VALUE, got {expr!r}")
    return key, parse_value(val.strip())


def _set_path(node, parts: list, value, where: str) -> None:
    head, rest = parts[0], parts[1:]
    if isinstance(node, list):
        if head.isdigit():
            i = int(head)
            if i >= len(node):
                raise UsageError(f"{where}: index {i} out of range ({len(node)} entries)")
            targets, parts_left = [node[i]], rest
        else:  # `workload.size_mib` applies to every [[workload]]
            targets, parts_left = node, parts
        for t in targets:
            if parts_left:
                _set_path(t, parts_left, value, where)
            else:
                raise UsageError(f"{where}: cannot replace a table entry")
        return
    if not isinstance(node, dict):
        raise UsageError(f"{where}: {head!r} is inside a value, not a table")
    if not rest:
        node[head] = value
        return
    if head not in node:
        node[head] = [{}] if head == "workload" else {}
    _set_path(node[head], rest, value, where)


def apply_overrides(scenario: dict, overrides) -> dict:
    """Apply dotted-key overrides (dict or list of pairs) in place; return it."""
    items = overrides.items() if isinstance(overrides, dict) else overrides
    for key, value in items:
        _set_path(scenario, key.split("."), value, key)
    return scenario


def check_written(text: str, keys: list, src_text: str | None = None, overrides=None) -> None:
    """The engine must parse the TOML written here. A value it cannot read (an integer too
    large, say) is reported where the user wrote it: a line of their file, or their --set;
    never a line of the text written here, which the user has not seen."""
    try:
        _engine.resolve(text)
    except _engine.ScenarioError as exc:
        errors = getattr(exc, "errors", None) or []
        if not any(e.get("kind") == "toml_syntax" for e in errors):
            return  # the engine reports the rest itself, in keys
        from numasim.tomlpos import locate

        mapped = [dict(e, loc=locate(e["loc"], keys, src_text, overrides)) if e.get("kind") == "toml_syntax" else e
                  for e in errors]
        new = _engine.ScenarioError("; ".join(f"{e['loc']}: {e['msg']}" for e in mapped))
        new.errors = mapped
        raise new from None


# ---------------------------------------------------------------- shortcuts


def _balancing(value) -> bool:
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("on", "true", "1", "yes"):
            return True
        if v in ("off", "false", "0", "no"):
            return False
        raise UsageError(f"balancing must be on/off, got {value!r}")
    return bool(value)


def scenario_toml(
    scenario=None,
    *,
    workload=None,
    machine=None,
    balancing=None,
    seed=None,
    features=None,
    sysctl=None,
    overrides=None,
    **workload_params,
) -> str:
    """Assemble the TOML text the engine receives.

    A TOML source with nothing to change is passed through untouched, so the
    engine sees (and reports on) exactly what the user wrote.
    """
    shortcut = dict(
        workload=workload, machine=machine, balancing=balancing, seed=seed,
        features=features, sysctl=sysctl,
    )
    changes = any(v is not None for v in shortcut.values()) or workload_params or overrides
    src = read_source(scenario) if scenario is not None else {}
    src_text = src if isinstance(src, str) else None
    if isinstance(src, str):
        if not changes:
            return src
        src = parse_toml(src)
    d = copy.deepcopy(src)  # keeps the caller's dict intact
    if scenario is None:
        d.setdefault("machine", {"profile": machine or DEFAULT_MACHINE})
    if seed is not None:
        d["seed"] = int(seed)
    if machine is not None:
        d.setdefault("machine", {})["profile"] = machine
    if balancing is not None:
        d.setdefault("kernel", {})["numa_balancing"] = _balancing(balancing)
    if features:
        d.setdefault("kernel", {}).setdefault("features", {}).update(features)
    if sysctl:
        d.setdefault("kernel", {}).setdefault("sysctl", {}).update(sysctl)
    if workload is not None:
        d["workload"] = [{"kind": workload, **workload_params}]
    elif workload_params:
        entries = d.get("workload")
        if not entries:
            raise UsageError("workload parameters given but the scenario has no [[workload]]")
        for w in entries if isinstance(entries, list) else [entries]:
            w.update(workload_params)
    if overrides:
        apply_overrides(d, overrides)
    text, keys = to_toml_with_keys(d)
    check_written(text, keys, src_text=src_text, overrides=overrides)
    return text

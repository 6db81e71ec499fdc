"""Where a key sits in a TOML text: the line a user wrote it on. Used to report a problem
found in the TOML numasim wrote (after --set overrides) at the user's own line, or at their
--set. A line scanner, not a parser: tables, arrays of tables, `key = value` and dotted keys."""

from __future__ import annotations

import re

_LINE_COL = re.compile(r"^line (\d+), column (\d+)$")
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_\-\"'. ]+?)\s*=\s*(.*)$")


def _split_key(k: str) -> tuple:
    return tuple(part.strip().strip("\"'") for part in k.split("."))


def key_lines(text: str) -> dict:
    """{key path: (line, column of its value)}, 1-based, for every `key = value` line."""
    out: dict = {}
    table: tuple = ()
    arrays: dict = {}
    for n, line in enumerate(text.splitlines(), 1):
        h = _HEADER.match(line)
        if h:
            name = _split_key(h.group(2))
            if h.group(1) == "[[":
                arrays[name] = arrays.get(name, -1) + 1
                table = name[:-1] + (name[-1], arrays[name])
            else:
                table = name
            continue
        a = _ASSIGN.match(line)
        if a and not line.lstrip().startswith("#"):
            out.setdefault(table + _split_key(a.group(1)), (n, a.start(2) + 1))
    return out


def dotted(path: tuple) -> str:
    """("workload", 0, "size_mib") -> "workload[0].size_mib", as the engine names keys."""
    s = ""
    for p in path:
        s += f"[{p}]" if isinstance(p, int) else (f".{p}" if s else p)
    return s


def locate(loc: str, keys: list, src_text: str | None, overrides) -> str:
    """``loc`` ("line L, column C" of the written text, whose line i holds key path
    ``keys[i-1]``) as the user's position: their file's line and column if the key is in it,
    else the --set that gave it, else the key."""
    m = _LINE_COL.match(loc or "")
    if not m or not 0 < int(m.group(1)) <= len(keys) or keys[int(m.group(1)) - 1] is None:
        return loc
    path = keys[int(m.group(1)) - 1]
    name = dotted(path)
    given = [k for k, _ in (overrides.items() if isinstance(overrides, dict) else overrides or [])]
    for k in given:  # workload.size_mib names workload[0].size_mib, workload[1].size_mib, ...
        parts = tuple(int(p) if p.isdigit() else p for p in k.split("."))
        plain = tuple(p for p in path if not isinstance(p, int))
        if parts == path or parts == plain:
            return f"--set {k} ({name})"
    if src_text is not None and path in key_lines(src_text):
        line, col = key_lines(src_text)[path]
        return f"line {line}, column {col} ({name})"
    return name

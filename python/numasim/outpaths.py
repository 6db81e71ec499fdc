"""Output paths are checked before any work: a run or a plot is never lost to a bad `--save`
or `--out` found only at the end."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from numasim.scenario import UsageError


def _nearest_existing(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_output(path, kind: str, option: str) -> None:
    """UsageError unless ``path`` can be written: ``kind`` "file" (a file, e.g. a result
    JSON and its sidecars) or "dir" (a directory, created if missing). The nearest existing
    directory is probed by creating and removing a temporary file there, which also catches a
    read-only file system, or /proc, where permission bits say yes."""
    p = Path(path)
    if kind == "file" and str(path).endswith(("/", os.sep)):
        raise UsageError(f"{option} {path}: names a directory; give a file name (a directory is for --iterations)")
    if kind == "file" and p.is_dir():
        raise UsageError(f"{option} {p}: is a directory; give a file name")
    if kind == "dir" and p.exists() and not p.is_dir():
        raise UsageError(f"{option} {p}: exists and is not a directory")
    where = _nearest_existing(p if kind == "dir" else p.parent)
    if not where.is_dir():
        raise UsageError(f"{option} {p}: {where} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=where, prefix=".numasim-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {p}: cannot write in {where} ({exc.strerror or exc})") from None

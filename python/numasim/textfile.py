"""Reading the text files numasim is given (scenarios, results): UTF-8 only, and a file that
is not UTF-8 is a UsageError naming it and the first bad byte, never a traceback."""

from __future__ import annotations

from pathlib import Path

from numasim.scenario import UsageError


def bad_byte(exc: UnicodeDecodeError) -> str:
    """'byte 0xe9 at offset 34': where a UTF-8 decode failed."""
    obj = exc.object
    byte = f"byte 0x{obj[exc.start]:02x}" if isinstance(obj, (bytes, bytearray)) else "a byte"
    return f"{byte} at offset {exc.start}"


MAX_BYTES = 64 << 20  # far above any scenario; stops a read of /dev/zero or a huge wrong file


def read_text(path, what: str = "text", max_bytes: int = MAX_BYTES) -> str:
    """The file's text; UsageError if it is not UTF-8, larger than ``max_bytes`` or cannot be
    read (a missing file raises FileNotFoundError, which the command line reports as such)."""
    p = Path(path)
    with open(p, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UsageError(f"{p}: larger than {max_bytes >> 20} MiB, not a {what} file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{p}: not UTF-8 {what} ({bad_byte(exc)}); numasim reads UTF-8 files only") from None


def check_utf8_args(args) -> None:
    """UsageError for a command-line argument that is not valid UTF-8 (Python keeps such bytes
    as lone surrogates, which cannot reach the engine)."""
    for a in args:
        try:
            str(a).encode("utf-8")
        except UnicodeEncodeError as exc:
            shown = str(a).encode("utf-8", "backslashreplace").decode("ascii", "replace")
            raise UsageError(f"argument '{shown}' is not valid UTF-8 (at character {exc.start})") from None

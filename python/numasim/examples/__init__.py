"""Example scenarios shipped with numasim (`numasim examples`): a starting point to copy and
change. Each file's first comment lines say what it shows."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from numasim.scenario import UsageError

HERE = Path(__file__).parent


def names() -> list:
    return sorted(p.stem for p in HERE.glob("*.toml"))


def path(name: str) -> Path:
    """The file of example ``name``; UsageError naming the known ones otherwise."""
    p = HERE / f"{name}.toml"
    if name not in names():
        raise UsageError(f"no example {name!r}; the examples are: {', '.join(names())}")
    return p


def description(name: str) -> str:
    """The first sentence of the example's leading comment."""
    lines = []
    for line in path(name).read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# ").strip())
    text = " ".join(lines)
    return re.split(r"(?<=[a-z0-9)`]):\s|\.\s", text, maxsplit=1)[0].rstrip(".")


def copy(name: str, dest: str | None = None, force: bool = False) -> str:
    """Write example ``name`` to ``dest`` (a file, a directory, "-" for stdout; default
    ./NAME.toml); returns where. An existing file is kept unless ``force``."""
    text = path(name).read_text(encoding="utf-8")
    if dest == "-":
        sys.stdout.write(text)
        return "-"
    out = Path(dest) if dest else Path(f"{name}.toml")
    if out.is_dir():
        out = out / f"{name}.toml"
    if out.exists() and not force:
        raise UsageError(f"{out} exists; --force replaces it")
    from numasim.outpaths import check_output

    check_output(str(out), "file", "PATH")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return str(out)


def cmd_examples(args) -> int:
    if args.action == "copy":
        if not args.name:
            raise UsageError("examples copy NAME [PATH]: give an example's name (numasim examples)")
        where = copy(args.name, args.dest, args.force)
        if where != "-":
            print(f"wrote {where}; run it with: numasim run {where}", file=sys.stderr)
        return 0
    if args.action is not None:
        raise UsageError(f"examples takes `copy NAME [PATH]` or nothing, not {args.action!r}")
    width = max(len(n) for n in names())
    for n in names():
        print(f"{n.ljust(width)}  {description(n)}")
    return 0


EPILOG = """examples:
  numasim examples                                  # list them
  numasim examples copy memory-eater-pmbench        # writes ./memory-eater-pmbench.toml
  numasim examples copy kvm-guest - | less          # print one
  numasim run memory-eater-pmbench.toml"""


def register(subparsers, formatter) -> None:
    """Add `examples` to the numasim command line."""
    sp = subparsers.add_parser(
        "examples", help="list the example scenarios, or copy one out to start from",
        description="List the example scenarios shipped with numasim, or write one out as a\n"
                    "TOML file to run or change (docs/scenario.md describes every key).",
        epilog=EPILOG, formatter_class=formatter)
    sp.add_argument("action", nargs="?", choices=["copy"], help="copy: write example NAME out")
    sp.add_argument("name", nargs="?", help="the example (as listed)")
    sp.add_argument("dest", nargs="?", metavar="PATH",
                    help="file or directory to write (default ./NAME.toml; - prints it)")
    sp.add_argument("--force", action="store_true", help="replace PATH if it exists")
    sp.set_defaults(func=cmd_examples)

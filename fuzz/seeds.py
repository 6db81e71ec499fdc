"""Write the fuzzing seeds into DIR: every shipped scenario (scripts/shipped-scenarios.py),
the example scenarios (`numasim examples`), the invalid test fixtures, and a few of them
with `--set` overrides appended (NUL-separated, as fuzz/scenario_fuzz.py reads its input).

    python fuzz/seeds.py DIR
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETS = [b"workload.size_mib=64", b"machine.nodes=4", b"kernel.thp.enabled=\"always\"",
        b"workload.0.kind=\"pmbench\"", b"run.max_sim_s=0.5", b"machine.distances=[[10,21],[21,10]]"]


def seeds() -> list:
    """The seed inputs, as bytes."""
    spec = importlib.util.spec_from_file_location("shipped", ROOT / "scripts/shipped-scenarios.py")
    shipped = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shipped)
    texts = [t.encode() for t in shipped.shipped().values()]
    texts += [p.read_bytes() for p in sorted((ROOT / "python/numasim/examples").glob("*.toml"))]
    texts += [p.read_bytes() for p in sorted((ROOT / "tests/fixtures/bad").glob("*.toml"))]
    small = (ROOT / "tests/fixtures/good/numa02-small.toml").read_bytes()
    return texts + [small + b"\0" + s for s in SETS] + [small + b"\0" + b"\0".join(SETS[:4])]


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    data = seeds()
    for d in data:  # libFuzzer's naming: the input's SHA-1
        (out / hashlib.sha1(d).hexdigest()).write_bytes(d)
    print(f"{len(data)} seeds in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

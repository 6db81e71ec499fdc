"""Write every shipped scenario as a TOML file into DIR (default: shipped-scenarios/).

The experiments' runs (`numasim reproduce`), the `numasim bench` workloads, the real-kernel
validation scenarios, the PGO training scenarios and the test fixtures: the inputs to compare
two engine builds byte for byte (docs/performance.md, "Measuring a change"):

    python scripts/shipped-scenarios.py /tmp/sc
    for f in /tmp/sc/*.toml; do RESULT_JSON=/tmp/before/$(basename $f .toml).json \
        target/release/examples/run $f >/dev/null; done
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def shipped() -> dict:
    """{name: TOML text} of every shipped scenario."""
    from numasim import experiments
    from numasim.cli import BENCH_WORKLOADS, _bench_scenario

    out = {}
    for name in experiments.names():
        for key, toml in experiments.get(name).scenarios().items():
            label = "-".join(str(k) for k in key) if isinstance(key, tuple) else str(key)
            out[f"exp-{name}-{label}"] = toml
    for w in BENCH_WORKLOADS:
        out[f"bench-{w}"] = _bench_scenario(w)[1]
    for d, tag in ((ROOT / "python/numasim/validation", "validation"), (ROOT / "scripts/pgo", "pgo"),
                   (ROOT / "tests/fixtures/good", "fixture")):
        for f in sorted(d.glob("*.toml")):
            out[f"{tag}-{f.stem}"] = f.read_text(encoding="utf-8")
    return out


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "shipped-scenarios")
    out.mkdir(parents=True, exist_ok=True)
    for name, toml in shipped().items():
        (out / (re.sub(r"[^\w.+-]", "_", name) + ".toml")).write_text(toml, encoding="utf-8")
    print(f"{len(list(out.glob('*.toml')))} scenarios in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Pack boots of `numasim validate SCENARIO --kernel V --calibrate [--boots N] --out DIR` into a
boots file of python/numasim/validation/results/ (`numasim fidelity` re-simulates them).

    scripts/pack-vm-boots.py OUT.json --date 2026-11-26 --host "..." DIR...

Each DIR holds one boot's vm.json and scenario.toml (`DIR/SCENARIO-KERNEL/` of a single boot, or
its `bootN/`); a sim.json beside them is used to check that the trimmed VM result gives the same
checked figures as the full one. The boots are written in the order given.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from numasim.realkernel import bootdata
from numasim.realkernel import compare as cmpmod
from numasim.realkernel.kernels import KERNELS
from numasim.scenario import parse_toml
from numasim.storage import load_result


def numeric_checked(cmp: dict) -> dict:
    return {r["metric"]: (r["sim"], r["vm"]) for r in cmp["rows"]
            if r["checked"] and not isinstance(r["vm"], str)}


def boot_of(d: Path) -> dict:
    vm_path = d / "vm.json"
    raw = json.loads(vm_path.read_text())
    kernel = raw["source"]["kernel_choice"]
    if kernel not in KERNELS:
        sys.exit(f"{vm_path}: unknown kernel {kernel}")
    named = d.parent if d.name.startswith("boot") else d
    suffix = f"-{kernel}"
    if not named.name.endswith(suffix):
        sys.exit(f"{d}: expected a directory SCENARIO-{kernel} (validate --out DIR writes one)")
    scenario = named.name[: -len(suffix)]
    when = datetime.datetime.fromtimestamp(vm_path.stat().st_mtime, datetime.timezone.utc)
    origin = "validate --calibrate" + (f" --boots N, {d.name}" if d.name.startswith("boot") else "")
    boot = bootdata.pack(raw, scenario, kernel, parse_toml((d / "scenario.toml").read_text()),
                         when.strftime("%Y-%m-%dT%H:%MZ"), origin)
    if (d / "sim.json").exists():  # the trimmed result must give what the full one gives
        sim = load_result(d / "sim.json", check=False)
        full = numeric_checked(cmpmod.compare(sim, load_result(vm_path, check=False), timed=True))
        kept = numeric_checked(bootdata.compare(boot, sim))
        if full != kept:
            sys.exit(f"{d}: the trimmed VM result changes the checked figures: {full} != {kept}")
    return boot


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="boots file to write")
    ap.add_argument("dirs", nargs="+", help="boot directories (vm.json, scenario.toml)")
    ap.add_argument("--date", required=True, help="the day the boots ran")
    ap.add_argument("--host", required=True, help="the host they ran on")
    args = ap.parse_args()
    boots = [boot_of(Path(d)) for d in args.dirs]
    data = {"format": bootdata.FORMAT, "date": args.date, "host": args.host, "boots": boots}
    bootdata.check(data, args.out)
    # one boot per line: diffs stay readable
    lines = [json.dumps(b, separators=(",", ":")) for b in boots]
    head = {k: v for k, v in data.items() if k != "boots"}
    text = json.dumps(head, separators=(",", ":"))[:-1] + ',"boots":[\n' + ",\n".join(lines) + "\n]}\n"
    json.loads(text)
    Path(args.out).write_text(text)
    print(f"{args.out}: {len(boots)} boots, {len(text)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())

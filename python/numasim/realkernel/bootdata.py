"""Real-kernel boots shipped with the package as data (`validation/results/*.json`), for
`numasim fidelity`: each is one boot of `numasim validate SCENARIO --kernel V --calibrate`,
kept as the costs that boot measured (`numaw calibrate`'s raw figures) and as much of the VM's
result as `realkernel/compare.py` reads for the checked counts and times. Re-simulating a
boot is what `validate --calibrate` does for it (`scenario()`: the shipped scenario with the
kernel's profile and the boot's costs applied by `calibrate.apply`), so the simulated side
always comes from the current engine and the VM side stays as measured.

`pack()` makes a boot's record from a saved vm.json (scripts/pack-vm-boots.py); `load()`
reads and checks the shipped files.
"""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path

from numasim.scenario import UsageError

FORMAT = 1
# the scenario sections that decide what the VM ran: a boot no longer describes the shipped
# scenario when one of them changed (the costs do not count: the boot's own replace them)
RAN = ("workload", "kernel", "run")
MACHINE_RAN = ("nodes", "cpus_per_node", "smt", "memory_gib_per_node", "distances")
# what compare.metrics / pacing.metrics read of a VM result for the numeric metrics
VMSTAT_SERIES = ("numa_pte_updates", "numa_hint_faults")
SYSCALL_KEYS = ("ret", "tlb_irq")
BOOT_KEYS = ("scenario", "kernel", "vm_kernel", "boot", "origin", "ran", "calibration", "vm")


def results_dir() -> Path:
    return Path(str(resources.files("numasim") / "validation" / "results"))


def trim(raw: dict) -> dict:
    """The part of a (VM or simulated) result that compare.compare's numeric metrics read:
    the totals, times, the TLB interrupt line, each syscall's return value and TLB
    interrupts, the runner's own CPU time, and the sampled series of PTE updates, hint faults and scan sequence numbers.
    Placement (series.tasks, numa_events) is left out: it is categorical, not a ratio."""
    from numasim.realkernel.compare import TOTALS

    series = raw.get("series") or {}
    vm = series.get("vmstat") or {}
    out = {
        "completed": raw.get("completed", True),
        "counters": {k: raw["counters"][k] for k in TOTALS if k in raw.get("counters", {})},
        "times": dict(raw["times"]),
        "series": {"vmstat": thin({k: list(vm[k]) for k in ("time_s", *VMSTAT_SERIES) if k in vm}),
                   "scan_seq": dict(series.get("scan_seq") or {}),
                   "memory": {k: list(v) for k, v in (series.get("memory") or {}).items() if k in ("time_s", "pid", "node", "pages")}},
    }
    tlb = (raw.get("interrupts") or {}).get("TLB")
    if tlb is not None:
        out["interrupts"] = {"TLB": {"total": int(tlb["total"])}}
    runner = (raw.get("source") or {}).get("runner")
    if runner:  # the runner's own CPU time: the simulated sampler's costs (realkernel/sampler.py)
        out["source"] = {"runner": dict(runner)}
    if raw.get("syscalls"):
        out["syscalls"] = [{k: c[k] for k in SYSCALL_KEYS if k in c} for c in raw["syscalls"]]
    if raw.get("memory_tiers"):
        extra, placement = _tiering_part(raw)
        out.update(extra)
        out["series"]["placement"] = placement
    return out


def _tiering_part(raw: dict) -> tuple:
    """What realkernel/tiering.metrics reads of a tiering run: the tiers, the scenario's tiering
    mode, CPU nodes and workloads, which workload each pid ran, and the placement samples of
    the pmbench processes at the first and last sample time (hot_fast_share_start/_end)."""
    sc = raw.get("scenario") or {}
    topo = (sc.get("machine") or {}).get("topology") or {}
    owner = raw.get("placement_workload") or {}
    pmbench = {i for i, w in enumerate(sc.get("workloads") or []) if w.get("kind") == "pmbench"}
    pids = {int(p) for p, w in owner.items() if w in pmbench}
    pl = (raw.get("series") or {}).get("placement") or {}
    times = sorted({float(t) for t, pid in zip(pl.get("time_s", []), pl.get("pid", [])) if int(pid) in pids})
    ends = {times[0], times[-1]} if times else set()
    cols = [k for k in ("time_s", "pid", "bucket", "node", "pages") if k in pl]
    keep = [i for i, (t, pid) in enumerate(zip(pl.get("time_s", []), pl.get("pid", []))) if int(pid) in pids and float(t) in ends]
    placement = {k: [pl[k][i] for i in keep] for k in cols}
    if "buckets" in pl:
        placement["buckets"] = pl["buckets"]
    return {"memory_tiers": raw["memory_tiers"], "placement_workload": owner,
            "scenario": {"kernel": {"tiering": (sc.get("kernel") or {}).get("tiering")},
                         "machine": {"topology": {"node_cpus": topo.get("node_cpus")}},
                         "workloads": sc.get("workloads")}}, placement


def thin(series: dict) -> dict:
    """Sampled counters without the samples that repeat a repeat: of every run of samples whose
    counters all equal the previous sample's, the first is kept (compare.scan_windows ends a
    burst of PTE updates there) and the rest dropped, except the last sample of all. A
    counter's value at any time (pacing.count_at) and the scan windows stay the same."""
    names = [k for k in series if k != "time_s"]
    times = series.get("time_s") or []
    if not names or any(len(series[k]) != len(times) for k in names):
        return series
    def same(i):  # sample i repeats sample i-1
        return i > 0 and all(series[k][i] == series[k][i - 1] for k in names)

    keep = [i for i in range(len(times)) if not same(i) or not same(i - 1) or i == len(times) - 1]
    return {k: [v[i] for i in keep] for k, v in series.items()}


def ran_sections(d: dict) -> dict:
    """What the VM ran of scenario dict `d`: its workload, kernel and run tables, and the
    machine's topology."""
    out = {k: copy.deepcopy(d.get(k)) for k in RAN if k in d}
    m = d.get("machine") or {}
    out["machine"] = {k: m[k] for k in MACHINE_RAN if k in m}
    return out


def pack(vm_raw: dict, scenario: str, kernel: str, scenario_dict: dict, boot: str, origin: str) -> dict:
    """One boot's record: `vm_raw` a VM result's JSON (vm.json), `scenario_dict` the scenario
    as the boot ran it (its scenario.toml, the calibrated costs are not kept: they come from
    `calibration` again)."""
    src = vm_raw.get("source") or {}
    cal = src.get("calibration")
    if not cal:
        raise UsageError(f"{scenario} {kernel} {boot}: the VM result has no calibration (run with --calibrate)")
    return {"scenario": scenario, "kernel": kernel, "vm_kernel": src.get("kernel"), "boot": boot,
            "origin": origin, "ran": ran_sections(scenario_dict), "calibration": cal, "vm": trim(vm_raw)}


def _bad(path, msg: str):
    return UsageError(f"{path}: {msg}")


def check(data, path) -> list:
    """The boots of one data file, or a UsageError saying what is wrong with it."""
    from numasim.realkernel.kernels import KERNELS
    from numasim.realkernel.validate import shipped

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _bad(path, f"not a numasim boots file (expected an object with \"format\": {FORMAT})")
    boots = data.get("boots")
    if not isinstance(boots, list) or not boots:
        raise _bad(path, "no \"boots\" list")
    names = shipped()
    for i, b in enumerate(boots, 1):
        where = f"boot {i}"
        if not isinstance(b, dict):
            raise _bad(path, f"{where} is not an object")
        missing = [k for k in BOOT_KEYS if k not in b]
        if missing:
            raise _bad(path, f"{where} lacks {', '.join(missing)}")
        where = f"boot {i} ({b['scenario']} on {b['kernel']}, {b['boot']})"
        if b["scenario"] not in names:
            raise _bad(path, f"{where}: no shipped validation scenario {b['scenario']!r} (shipped: {', '.join(names)})")
        if b["kernel"] not in KERNELS:
            raise _bad(path, f"{where}: unknown kernel {b['kernel']!r} (known: {', '.join(sorted(KERNELS))})")
        if not isinstance(b["calibration"], dict) or "stream_0_0" not in b["calibration"]:
            raise _bad(path, f"{where}: \"calibration\" has no stream_0_0 (numaw calibrate's figures)")
        vm = b["vm"]
        if not isinstance(vm, dict) or not isinstance(vm.get("counters"), dict) or \
                not isinstance(vm.get("times"), dict) or "elapsed_s" not in vm["times"]:
            raise _bad(path, f"{where}: \"vm\" needs counters and times.elapsed_s")
        series = vm.get("series", {}).get("vmstat", {})
        lengths = {len(v) for v in series.values() if isinstance(v, list)}
        if len(lengths) > 1:
            raise _bad(path, f"{where}: the vm's vmstat series differ in length")
    return boots


def load(paths=None) -> list:
    """Every shipped boot (or those of `paths`), each with `file` set to where it came from."""
    files = [Path(p) for p in paths] if paths else sorted(results_dir().glob("*.json"))
    out = []
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise _bad(f, f"not JSON ({e})") from None
        for b in check(data, f):
            out.append({**b, "file": f.name})
    return out


def vm_result(boot: dict):
    """The boot's VM side as a Result (the trimmed fields only)."""
    from numasim.result import Result

    return Result(json.dumps(boot["vm"]))


def scenario(boot: dict, with_sampler: bool = True) -> dict:
    """The shipped scenario as `validate --calibrate` simulates this boot: the kernel's
    profile, the numaw process image, and the costs this boot measured (`with_sampler`: and the
    VM's runner beside the workload, realkernel/sampler.py)."""
    from numasim.realkernel import calibrate, sampler
    from numasim.realkernel.validate import scenario_dict

    d = scenario_dict(boot["scenario"], boot["kernel"])
    d = calibrate.apply(d, boot["calibration"])
    return sampler.add(d, boot.get("vm")) if with_sampler else d


def stale(boot: dict) -> list:
    """The sections of the shipped scenario that differ from what this boot ran ([] when it
    still describes the scenario)."""
    from numasim.realkernel.validate import scenario_dict

    now = ran_sections(scenario_dict(boot["scenario"], boot["kernel"]))
    ran = boot["ran"]
    return [k for k in sorted(set(now) | set(ran)) if now.get(k) != ran.get(k)]


def compare(boot: dict, sim) -> dict:
    """compare.compare of simulated result `sim` against the boot, with times checked (the
    simulation ran with the boot's measured costs)."""
    from numasim.realkernel import compare as cmpmod

    return cmpmod.compare(sim, vm_result(boot), timed=True)

"""Side-by-side comparison of a simulated and a real-kernel result of one scenario.

Totals of the counters that depend on how many scan windows fit into the run differ when
the VM's wall clock runs a different number of windows than the simulation, so the table
also gives per-window quantities (a window = a burst of numa_pte_updates in the sampled
series) and, for migrate_pages/move_pages drivers, per-call quantities.
"""

from __future__ import annotations

from numasim.realkernel import pacing, tiering

TOLERANCE = 0.25
# times are checked (±30%) only where the simulation ran with the VM's measured costs
# (`validate --calibrate` or `--costs`): with hand-set costs they say nothing of the model
TIME_TOLERANCE = 0.30
TIMES = ("elapsed_s", "system_s")

TOTALS = [
    "numa_pte_updates", "numa_huge_pte_updates", "numa_hint_faults", "numa_hint_faults_local",
    "numa_pages_migrated", "pgmigrate_success", "thp_migration_success", "nr_tlb_remote_flush",
    "nr_tlb_remote_flush_received", "pgfault",
    "pgpromote_success", "pgpromote_candidate", "pgdemote_kswapd", "pgdemote_direct",
]
# memory tiering (numa_balancing 2, 3): what is checked instead of the scan windows
TIERING_CHECKED = ["pgpromote_success", "pgdemote_kswapd", "hot_fast_share_end", "memory_tiers"]


MIN_WINDOW_PTES = 256  # 1 MiB: smaller bursts are scans of the stack and heap only


def scan_windows(result) -> int:
    """Scan windows that reached the workload's buffers: runs of consecutive samples in which
    numa_pte_updates grew by at least MIN_WINDOW_PTES in all (a window whose VMAs were skipped
    still updates a few PTEs of the stack or the heap; those are not counted)."""
    vm = result.raw["series"]["vmstat"]
    ptes = vm.get("numa_pte_updates") or []
    windows, prev, burst = 0, 0, 0
    for v in list(ptes) + [ptes[-1] if ptes else 0]:
        if v > prev:
            burst += v - prev
        else:
            if burst >= MIN_WINDOW_PTES:
                windows += 1
            burst = 0
        prev = v
    if not ptes and result.counters.get("numa_pte_updates", 0) >= MIN_WINDOW_PTES:
        windows = 1
    return windows


def syscall_calls(result) -> int:
    """migrate_pages/move_pages calls: measured in a VM, from the scenario in a simulation."""
    calls = result.raw.get("syscalls")
    if calls:
        return sum(1 for c in calls if not (isinstance(c.get("ret"), int) and c["ret"] < 0))
    n = 0
    for w in result.scenario.get("workloads", []):
        if w.get("kind") == "migratepages":
            n += 2 * int(w.get("loops", 1))
        elif w.get("kind") == "move_pages":
            n += int(w.get("loops", 1))
    return n


def tlb_shootdowns(result):
    """TLB-shootdown IPIs received: the /proc/interrupts TLB line (both kinds of result)."""
    t = result.interrupts.get("TLB")
    if t is not None:
        return int(t["total"])
    return result.counters.get("nr_tlb_remote_flush_received")


def metrics(result) -> dict:
    c = result.counters
    m = {k: c.get(k) for k in TOTALS}
    m["tlb_shootdown_ipis"] = tlb_shootdowns(result)
    w = scan_windows(result)
    m["scan_windows"] = w
    if w:
        m["numa_pte_updates_per_window"] = c.get("numa_pte_updates", 0) / w
        m["numa_hint_faults_per_window"] = c.get("numa_hint_faults", 0) / w
    calls = syscall_calls(result)
    m["syscall_calls"] = calls
    if calls:
        tlb = m["tlb_shootdown_ipis"]
        m["tlb_ipis_per_call"] = tlb / calls if tlb is not None else None
        m["pgmigrate_success_per_call"] = c.get("pgmigrate_success", 0) / calls
        measured = [x for x in result.raw.get("syscalls") or [] if not (isinstance(x.get("ret"), int) and x["ret"] < 0)]
        if measured:  # the VM measures each call on its own, without the rest of the run
            m["tlb_ipis_per_call_measured"] = sum(x.get("tlb_irq", 0) for x in measured) / len(measured)
    if tiering_mode(result):
        m.update(tiering.metrics(result))
    m["elapsed_s"] = result.elapsed_s
    m["system_s"] = result.times.get("system_s")
    m["user_s"] = result.times.get("user_s")
    return m


def tiering_mode(result) -> bool:
    """The scenario ran kernel.numa_balancing 2 or 3 (memory tiering)."""
    return bool(int(((result.scenario.get("kernel") or {}).get("tiering") or {}).get("mode", 0)) & 2)


# the acceptance metrics: per-window where the run has windows, else totals; in tiering runs
# promotions, demotions, the hot set's share of fast memory at the end and the tiers
def checked_metrics(vm_m: dict) -> list:
    if "memory_tiers" in vm_m:
        return [k for k in TIERING_CHECKED if k in vm_m]
    names = []
    if vm_m.get("scan_windows"):
        names += ["numa_pte_updates_per_window", "numa_hint_faults_per_window"]
    else:
        names += ["numa_pte_updates", "numa_hint_faults"]
    names.append("numa_pages_migrated")
    if vm_m.get("scan_passes"):
        names += ["scan_passes", "numa_pte_updates_per_pass", "numa_hint_faults_per_pass"]
    for k in ("placement_fork", "placement_final"):
        if vm_m.get(k):
            names.append(k)
    # where the processes' memory ended, per node (issue 27: "the final share on each node")
    names += sorted(k for k in vm_m if k.startswith("memory_share_node") and k.endswith("_end"))
    if vm_m.get("syscall_calls"):
        names += ["tlb_ipis_per_call", "pgmigrate_success_per_call"]
    return names


def within(sim, vm, tol=TOLERANCE):
    if sim is None or vm is None:
        return None
    if isinstance(sim, str) or isinstance(vm, str):
        return sim == vm
    if vm == 0:
        return sim == 0 or sim <= 16  # a handful of stray events against none
    return abs(sim - vm) <= tol * abs(vm)


def compare(sim, vm, timed: bool = False) -> dict:
    """Rows of (metric, sim, vm, ratio, checked, ok). `timed`: the simulation ran with costs
    measured in the VM (numasim calibrate), so elapsed and system time are checked too."""
    s, v = metrics(sim), metrics(vm)
    # what NUMA balancing decided, up to the time both runs last (pacing.py)
    horizon = min(x for x in (sim.elapsed_s, vm.elapsed_s) if x) if (sim.elapsed_s or vm.elapsed_s) else None
    s.update(pacing.metrics(sim, horizon))
    v.update(pacing.metrics(vm, horizon))
    rows = []
    checked = checked_metrics(v) + (list(TIMES) if timed else [])
    # a single process's worker placement, where the scheduler moved a worker across nodes in
    # either run (with none moved, the threads' affinity decided it)
    if "placement_workers_final" in v and (s.get("cross_node_moves") or v.get("cross_node_moves")):
        checked.append("placement_workers_final")
    for k in v:
        sv, vv = s.get(k), v.get(k)
        num = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)  # noqa: E731
        ratio = (sv / vv) if num(sv) and num(vv) and vv else None
        tol = TIME_TOLERANCE if k in TIMES else TOLERANCE
        rows.append({"metric": k, "sim": sv, "vm": vv, "ratio": ratio, "checked": k in checked,
                     "tolerance": tol, "ok": within(sv, vv, tol) if k in checked else None})
    ok = all(r["ok"] for r in rows if r["checked"])
    return {"rows": rows, "ok": ok, "tolerance": TOLERANCE, "timed": timed}


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def _columns(head: list, rows: list) -> str:
    """Left-aligned text columns under a rule."""
    widths = [max(len(x[i]) for x in rows + [head]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def table(cmp: dict) -> str:
    head = ["metric", "sim", "vm", "sim/vm", "check"]
    rows = [[r["metric"], _fmt(r["sim"]), _fmt(r["vm"]), "-" if r["ratio"] is None else f"{r['ratio']:.2f}",
             "" if not r["checked"] else
             f"{'ok' if r['ok'] else 'DIFFERS'} ±{round(100 * r.get('tolerance', TOLERANCE))}%"] for r in cmp["rows"]]
    return _columns(head, rows)


def across_boots(cmps: list) -> dict:
    """Several boots of one scenario and kernel against the one (deterministic) simulation:
    per checked metric, the simulated value, each boot's, and in how many boots it agreed
    (within ±25%, or the same placement). `ok`: every checked metric agreed in a majority."""
    rows, order = {}, []
    for i, cmp in enumerate(cmps):
        for r in cmp["rows"]:
            if not r["checked"]:
                continue
            if r["metric"] not in rows:
                order.append(r["metric"])
                rows[r["metric"]] = {"metric": r["metric"], "sim": [None] * len(cmps), "vm": [None] * len(cmps),
                                     "agree": 0}
            rows[r["metric"]]["sim"][i] = r["sim"]
            rows[r["metric"]]["vm"][i] = r["vm"]
            rows[r["metric"]]["agree"] += 1 if r["ok"] else 0
    out = [rows[m] for m in order]
    for r in out:  # one simulation for all boots, or (validate --calibrate) one per boot
        if len({repr(x) for x in r["sim"]}) == 1:
            r["sim"] = r["sim"][0]
        r["of"] = sum(v is not None for v in r["vm"])
        r["majority"] = 2 * r["agree"] > r["of"]
    return {"boots": len(cmps), "rows": out, "ok": bool(out) and all(r["majority"] for r in out)}


def boots_table(summary: dict) -> str:
    head = ["metric", "sim", "vm per boot", "agree"]
    sim = lambda v: ", ".join(_fmt(x) for x in v) if isinstance(v, list) else _fmt(v)  # noqa: E731
    rows = [[r["metric"], sim(r["sim"]), ", ".join(_fmt(v) for v in r["vm"]), f"{r['agree']} of {r['of']}"]
            for r in summary["rows"]]
    return _columns(head, rows)


def kernel_profile_table(vm_raw: dict, top: int = 15) -> str:
    """The functions that a `--kernel-profile` boot's kernel-mode ticks interrupted most often:
    hits, their share of all kernel-mode ticks, and CPU seconds at the guest's HZ."""
    prof = vm_raw.get("kernel_profile", {})
    total = prof.get("hits") or sum(r["hits"] for r in prof.get("rows", [])) or 1
    hz = 250  # CONFIG_HZ of the Debian kernels
    rows = [[r["sym"], str(r["hits"]), f"{100 * r['hits'] / total:.1f}%", f"{r['hits'] / hz:.2f}"]
            for r in prof.get("rows", [])[:top]]
    rows.append(["(all kernel-mode ticks)", str(total), "100%", f"{total / hz:.2f}"])
    return _columns(["function", "ticks", "share", "cpu_s"], rows)

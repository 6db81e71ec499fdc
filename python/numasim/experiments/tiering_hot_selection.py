"""tiering-hot-selection: Huang Ying's "memory tiering: hot page selection" (v6.1; cover of
-V4 RESEND, 13 Jul 2022, tiering.md §4.5), reproduced by mechanism.

The changelog's table: pmbench score and promotion rate on "a 2-socket server system with DRAM
and PMEM installed", numa_balancing = 2, for the 5.19 tiering mode (base) and after each of the
series' three patches: hot page selection by hint-fault latency (33024536bafd), the promotion
candidate rate limit (c6833e10008f), automatic threshold adjustment (c959924b0dc5).

Columns (only features differ, on kernel 5.19, the series' base): base; + numa-tiering-hot-
threshold; + numa-tiering-rate-limit; + numa-tiering-auto-threshold.

Parameters the changelog leaves open, chosen once (not fitted to its table):
- machine intel-2s-dram-pmem (2 sockets, 192 GiB DRAM + 768 GiB Optane PMEM as kmem per socket);
- pmbench as LKP runs it: one process, 48 threads (one per core), a 512 GiB working set (more
  than the 384 GiB of DRAM; its hot middle, +-1 sigma, fits), `normal` pattern with sigma = set/6
  pages (workloads.md §6's assumption), 80% reads (the ratio of Huang's earlier tiering
  changelogs; recalled), LKP's default 300 s;
- the rate limit: the knob's documented rule of thumb, 1/10 of the PMEM node's write bandwidth
  (the profile's Optane writes saturate at ~4 writers x 1 GiB/s: 429 MB/s).

Scale: the run is the full machine shrunk by SCALE in everything that is a capacity (each node's
memory, pmbench's threads and set, the rate limit) with every per-page time kept: the accesses
per page per second (threads / set), the hot threshold, the watermarks' share of a node, and the
time between two scans of a page. The last needs the scan rate shrunk too: the full-scale scanner
runs at its floor (task_scan_min: 256 MB per 100 ms, MAX_SCAN_WINDOW 2560 MB/s), which does not
scale, so the shrunk run sets numa_balancing_scan_period_min_ms to the full-scale pass time
(task_scan_min's other term, scan_period_min / nr_scan_windows, then gives that pass time; in
mode 2 the period never adapts, tiering.md §3.11). Scores and MB/s are then 1/SCALE of the full
machine's: the table shows them x SCALE beside the changelog's. The checks compare each step's
ratios (scale-free) with the changelog's: the direction, and within +-35%.
"""

from __future__ import annotations

from numasim.experiments.registry import Experiment, Row, register
from numasim.scenario import apply_overrides, to_toml

MACHINE = "intel-2s-dram-pmem"
SEED = 1
VERSION = "5.19"
SCALE = 16
FULL = {"dram_gib": 192, "pmem_gib": 768, "threads": 48, "set_mib": 512 * 1024}
READ_RATIO = 80
DURATION_S = 300.0
MAX_SCAN_WINDOW_MBPS = 2560  # kernel/sched/fair.c: MAX_SCAN_WINDOW
PMEM_WRITE_MBPS = 4 * 1024 * 1.048576  # ~4 writers x 1 GiB/s (the profile's stream_gibps to PMEM)
RATE_LIMIT_MBPS = PMEM_WRITE_MBPS / 10  # Documentation/admin-guide/sysctl/kernel.rst rule of thumb
COLUMNS = ["base", "hot selection", "rate limit", "auto adjustment"]
FEATURES = ["numa-tiering-hot-threshold", "numa-tiering-rate-limit", "numa-tiering-auto-threshold"]
# tiering.md §4.5: pmbench score (accesses/s) and promote rate (MB/s)
REF_SCORE = {"base": 146887704.1, "hot selection": 165695601.2, "rate limit": 162814569.8,
             "auto adjustment": 170495294.0}
REF_PROMOTE = {"base": 725.6, "hot selection": 544.0, "rate limit": 165.2, "auto adjustment": 136.9}
RATIO_BAND = 0.35
PAGE = 4096


def scaled() -> dict:
    """The shrunk run's parameters (module docstring, "Scale")."""
    set_mib = FULL["set_mib"] // SCALE
    pages = set_mib * 256
    return {
        "memory_gib_per_node": [FULL["dram_gib"] / SCALE] * 2 + [FULL["pmem_gib"] / SCALE] * 2,
        "threads": FULL["threads"] // SCALE,
        "set_mib": set_mib,
        "shape": pages // 6,
        # a full-scale pass over the set at the scanner's floor, in ms
        "scan_period_min_ms": FULL["set_mib"] * 1000 // MAX_SCAN_WINDOW_MBPS,
        "rate_limit_mbps": round(RATE_LIMIT_MBPS / SCALE),
    }


def scenario(column: str, overrides=None) -> dict:
    p = scaled()
    features = {f: True for f in FEATURES[:COLUMNS.index(column)]}
    sysctl = {"demotion_enabled": True, "numa_balancing_scan_period_min_ms": p["scan_period_min_ms"]}
    if "numa-tiering-rate-limit" in features:
        sysctl["numa_balancing_promote_rate_limit_MBps"] = p["rate_limit_mbps"]
    d = {
        "seed": SEED,
        "machine": {"profile": MACHINE, "memory_gib_per_node": p["memory_gib_per_node"]},
        "kernel": {"version": VERSION, "numa_balancing": 2, "sysctl": sysctl, "features": features},
        "workload": [{"kind": "pmbench", "threads": p["threads"], "set_mib": p["set_mib"], "pattern": "normal",
                      "shape": p["shape"], "read_ratio": READ_RATIO, "duration_s": DURATION_S}],
    }
    return apply_overrides(d, overrides or {})


def score(r) -> float:
    return float(sum(p.get("throughput_aps") or 0.0 for p in r.processes))


def promote_mbps(r) -> float:
    el = float(r.times["elapsed_s"])
    return r.counters.get("pgpromote_success", 0) * PAGE / 1e6 / el if el > 0 else 0.0


def step_row(name: str, values: dict, ref: dict) -> Row:
    """Each step's ratio (column / the one before) against the changelog's: same direction,
    within ±RATIO_BAND of its ratio."""
    ratios, refs, ok = {}, {}, True
    for prev, col in zip(COLUMNS, COLUMNS[1:]):
        a, b = values.get(prev), values.get(col)
        want = ref[col] / ref[prev]
        refs[col] = want
        got = b / a if a and b is not None else None
        ratios[col] = got
        ok = ok and got is not None and (got > 1) == (want > 1) and abs(got / want - 1) <= RATIO_BAND
    return Row(f"{name}: step ratio (column / the one before)", ratios, reference=refs,
               check=f"each step: the changelog's direction, within ±{RATIO_BAND:.0%} of its ratio", ok=ok)


def build_rows(results: dict) -> list:
    def col(fn):
        return {c: (fn(results[c]) if results.get(c) is not None else None) for c in COLUMNS}

    sc, pr = col(score), col(promote_mbps)
    full = lambda d: {c: (v * SCALE if v is not None else None) for c, v in d.items()}  # noqa: E731
    rows = [
        Row(f"pmbench score (accesses/s) x {SCALE}", full(sc), reference=dict(REF_SCORE)),
        Row(f"promote rate (MB/s) x {SCALE}", full(pr), reference=dict(REF_PROMOTE)),
        step_row("pmbench score", sc, REF_SCORE),
        step_row("promote rate", pr, REF_PROMOTE),
    ]
    for n in ("pgpromote_success", "pgpromote_candidate", "pgdemote_kswapd", "numa_hint_faults", "numa_pte_updates"):
        rows.append(Row(n, col(lambda r, n=n: int(r.counters.get(n, 0)))))
    rows.append(Row("kswapd CPU s (all nodes)", col(lambda r: float(sum(r.sim.get("kswapd_cpu_s") or [])))))
    cand = col(lambda r: int(r.counters.get("pgpromote_candidate", 0)))
    succ = col(lambda r: int(r.counters.get("pgpromote_success", 0)))
    limited = [c for c in COLUMNS[2:] if results.get(c) is not None]
    rows.append(Row("promotions <= candidates (rate-limited columns)", {c: succ[c] <= cand[c] for c in limited},
                    check="pgpromote_success <= pgpromote_candidate (c6833e10008f counts every candidate)",
                    ok=all(succ[c] <= cand[c] for c in limited), kind="invariant"))
    done = col(lambda r: bool(r.completed))
    rows.append(Row("runs completed", done, check="every run completes", ok=all(v is True for v in done.values()),
                    kind="invariant"))
    return rows


@register
class TieringHotSelection(Experiment):
    name = "tiering-hot-selection"
    description = ("memory tiering hot page selection (v6.1): 5.19 tiering vs + hint-fault latency threshold, "
                   "+ promotion rate limit, + automatic threshold adjustment (pmbench, DRAM + PMEM)")
    columns = COLUMNS

    def scenarios(self, overrides=None) -> dict:
        return {c: to_toml(scenario(c, overrides)) for c in COLUMNS}

    def evaluate(self, outcomes: dict) -> list:
        rows = build_rows({k: o.result for k, o in outcomes.items()})
        rows += [Row(f"run {c} failed", {}, check=o.error, ok=False, kind="invariant")
                 for c, o in outcomes.items() if o.error]
        return rows

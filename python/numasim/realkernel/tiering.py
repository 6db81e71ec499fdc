"""What memory tiering (kernel.numa_balancing 2, 3) did over a run, from a simulated or a
real-kernel result alike: the memory tiers and demotion targets, and where the hot set of a
pmbench workload was over time.

The hot set of a pmbench of pattern `normal` (or `normal_ih`) is the middle +-1 sigma of its
set (sigma = `shape` pages, n/12 for normal_ih): 68% of its accesses. Its share of fast
memory is read from series.placement (the process's mapped pages cut into 64 address
ranges, the ranges whose middle lies in the hot set) on the nodes with CPUs (DRAM in the
validation machines), whatever tier the kernel put the other nodes in.
"""

from __future__ import annotations

from collections import defaultdict

REACHED = 0.9  # hot_fast_share_90_s: from when the hot set's share of fast memory stayed at this or above


def cpu_nodes(result) -> list:
    topo = ((result.scenario.get("machine") or {}).get("topology") or {})
    return [i for i, c in enumerate(topo.get("node_cpus") or []) if c]


def tiers(result) -> dict | None:
    """{"tier": [id per node], "toptier": [...], "demotion": [[preferred targets] per node]}:
    the simulator's (sim.memory_tiers: tier id = abstract distance >> 7) or the guest's
    (memory_tiers, from sysfs and the boot log); None when the result has none."""
    sim = (result.raw.get("sim") or {}).get("memory_tiers")
    if sim:
        return {"tier": [a >> 7 for a in sim["adistance"]], "toptier": list(sim["toptier"]),
                "demotion": [list(d) for d in sim["demotion"]]}
    vm = result.raw.get("memory_tiers")
    if vm:
        return {"tier": vm["tier"], "toptier": vm["toptier"], "demotion": vm["demotion"]}
    return None


def tier_layout(t: dict | None) -> str | None:
    """The tiers as one comparable string: which nodes are top tier, which are lower, and each
    node's preferred demotion targets, e.g. "top 0 | lower 1 | demote 0>1"."""
    if not t:
        return None
    top = [str(i) for i, x in enumerate(t["toptier"]) if x]
    low = [str(i) for i, x in enumerate(t["toptier"]) if not x]
    dem = [f"{i}>{','.join(map(str, d))}" for i, d in enumerate(t["demotion"]) if d]
    return f"top {','.join(top) or '-'} | lower {','.join(low) or '-'} | demote {' '.join(dem) or '-'}"


def hot_buckets(w: dict, buckets: int = 64) -> list:
    """The address ranges (of `buckets` over the mapped pages) whose middle lies in the hot set
    of pmbench workload `w`; [] for other patterns."""
    pattern = str(w.get("pattern", "")).lower().replace("_", "")
    set_pages = int(w.get("set_mib", 128)) * 256
    map_pages = int(w.get("map_mib") or max(int(w.get("set_mib", 128)), 256)) * 256
    if pattern == "normal":
        sigma = float(w.get("shape", 1.0))
    elif pattern == "normalih":
        sigma = set_pages / 12.0
    else:
        return []
    lo, hi = set_pages / 2.0 - sigma, set_pages / 2.0 + sigma
    return [b for b in range(buckets) if lo <= (b + 0.5) * map_pages / buckets < hi]


def _workload_pids(result, w: int) -> set:
    owner = result.raw.get("placement_workload")
    if owner is not None:  # a VM result: the runner's `place` lines name the workload
        return {int(p) for p, ww in owner.items() if ww == w}
    return {int(p["pid"]) for p in result.processes if p.get("workload") == w}


def hot_share_series(result) -> list:
    """[(time_s, share)] of the first pmbench with a hot set: its hot pages on nodes with CPUs
    over its hot pages present, at each placement sample."""
    pl = (result.raw.get("series") or {}).get("placement") or {}
    for w, wl in enumerate(result.scenario.get("workloads") or []):
        if wl.get("kind") != "pmbench":
            continue
        hot = set(hot_buckets(wl, int(pl.get("buckets", 64))))
        pids = _workload_pids(result, w)
        if not hot or not pids:
            continue
        fast = set(cpu_nodes(result))
        acc = defaultdict(lambda: [0, 0])
        for t, pid, b, node, pages in zip(pl.get("time_s", []), pl.get("pid", []), pl.get("bucket", []),
                                          pl.get("node", []), pl.get("pages", [])):
            if int(pid) in pids and int(b) in hot:
                acc[float(t)][1] += pages
                if int(node) in fast:
                    acc[float(t)][0] += pages
        return [(t, f / n) for t, (f, n) in sorted(acc.items()) if n]
    return []


def reached_at(series: list, level: float) -> float | None:
    """The first sample from which the share stays at `level` or above to the end (None if
    the last one is below): a process that has touched only its first pages has them all on
    its own node for a moment, which is not the hot set in fast memory."""
    t_reached = None
    for t, x in series:
        if x < level:
            t_reached = None
        elif t_reached is None:
            t_reached = t
    return t_reached


def metrics(result) -> dict:
    """tier layout, the hot set's share of fast memory at the first and last samples
    (hot_fast_share_start, hot_fast_share_end) and from when it stayed at REACHED or above
    (hot_fast_share_90_s, s from the start of the run)."""
    m = {"memory_tiers": tier_layout(tiers(result))}
    s = hot_share_series(result)
    if s:
        m["hot_fast_share_start"] = s[0][1]
        m["hot_fast_share_end"] = s[-1][1]
        m["hot_fast_share_90_s"] = reached_at(s, REACHED)
    return m

"""From a resolved scenario to what the real-kernel runner needs: the workload spec lines
for `numaw run`, the kernel settings (sysctls, THP) and the VM topology."""

from __future__ import annotations

import re

from numasim.realkernel.errors import RealKernelError

AUTONUMA_KEYS = ("threads", "size_mib", "passes", "start_s")
KEYS = {
    "remote_toucher": ("size_mib", "threads", "local_threads", "touch_node", "run_node", "duration_s", "madvise",
                       "processes", "mapping", "start_s"),
    "pmbench": ("processes", "threads", "set_mib", "map_mib", "pattern", "shape", "read_ratio", "nodes",
                "duration_s", "overhead_ns", "start_s"),
    "memory_eater": ("size_gib", "node", "start_s", "free_at_s"),
    "migratepages": ("target", "from", "to", "loops", "interval_s", "start_s"),
    "move_pages": ("target", "node", "first_mib", "size_mib", "loops", "interval_s", "start_s"),
}
AUTONUMA = re.compile(r"numa0[12](_THREAD_ALLOC|_SMT)?(_HARD_BIND|_INVERSE_BIND)?$")

# [kernel.thp] sizes, in the engine's order: folio orders 0..9 (4 KiB << order)
THP_SIZES_KB = [4 << order for order in range(10)]


def _value(key: str, v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if key == "pattern":
        return re.sub(r"(?<!^)([A-Z])", r"_\1", str(v)).lower()  # "NormalIh" -> "normal_ih"
    if key == "nodes" and isinstance(v, int):  # the engine resolves the list into a node mask
        return ",".join(str(n) for n in range(64) if v >> n & 1)
    if key == "nodes" and isinstance(v, list):
        return ",".join(str(n) for n in v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def workload_lines(resolved: dict) -> list:
    """One `KIND key=value ...` line per [[workload]] of a resolved scenario."""
    lines = []
    for i, w in enumerate(resolved["workloads"]):
        kind = w["kind"]
        keys = AUTONUMA_KEYS if AUTONUMA.match(kind) else KEYS.get(kind)
        if keys is None:
            raise RealKernelError(f"workload[{i}]: kind {kind!r} has no real-kernel program "
                                  f"(supported: numa01/numa02 family, {', '.join(KEYS)})", loc=f"workload[{i}].kind")
        parts = [kind] + [f"{k}={_value(k, w[k])}" for k in keys if w.get(k) is not None]
        lines.append(" ".join(parts))
    return lines


def kernel_settings(resolved: dict) -> dict:
    """The guest settings: sysctl kernel.numa_balancing, the scan tunables, THP."""
    k = resolved["kernel"]
    sc = k.get("sysctl", {})
    thp = k.get("thp", {})
    sizes = thp.get("sizes") or []
    mthp = {THP_SIZES_KB[i]: s for i, s in enumerate(sizes) if i >= 2 and i < len(THP_SIZES_KB)}
    return {
        "numa_balancing": 1 if k.get("numa_balancing", True) else 0,
        "scan_delay_ms": sc.get("numa_balancing_scan_delay_ms", 1000),
        "scan_period_min_ms": sc.get("numa_balancing_scan_period_min_ms", 1000),
        "scan_period_max_ms": sc.get("numa_balancing_scan_period_max_ms", 60000),
        "scan_size_mb": sc.get("numa_balancing_scan_size_mb", 256),
        "thp_enabled": thp.get("enabled", "never"),
        "mthp": mthp,
        "hz": k.get("hz", 250),
    }


def topology(resolved: dict) -> dict:
    """Nodes, CPUs and memory of the machine, for -numa options (uniform CPUs per node)."""
    topo = resolved["machine"]["topology"]
    node_cpus = topo["node_cpus"]
    n = topo["nr_nodes"]
    counts = {len(c) for c in node_cpus}
    if len(counts) != 1:
        raise RealKernelError("the VM needs the same number of CPUs on every node", loc="machine.cpus_per_node")
    per = counts.pop()
    smt = int(topo.get("smt", 1))
    for node, cpus in enumerate(node_cpus):
        if cpus != list(range(node * per, (node + 1) * per)):
            raise RealKernelError("the VM numbers CPUs node by node; this topology interleaves them",
                                  loc="machine.topology")
    mem_mib = [int(p) * 4096 // (1 << 20) for p in topo["node_pages"]]
    return {"nodes": n, "cpus_per_node": per, "smt": smt, "mem_mib": mem_mib, "distance": topo["distance"]}


def sample_intervals(resolved: dict, floor_ms: int = 50) -> tuple:
    """(interval_ms, mem_ms, maps_ms) for the runner: /proc/vmstat every
    `run.sample_interval_ms`, the processes' threads every `run.placement_interval_ms` as the
    simulator samples series.tasks (0 there, off: once a second here, as placement needs
    them), their numa_maps every `run.numa_maps_interval_ms` (default: with the threads).
    Reading numa_maps walks every PTE, a CPU the workload loses, so neither is more often than
    the vmstat samples."""
    run = resolved.get("run", {})
    interval = max(int(run.get("sample_interval_ms", 100)), floor_ms)
    mem = max(int(run.get("placement_interval_ms", 1000)) or 1000, interval)
    maps = max(int(run.get("numa_maps_interval_ms") or mem), mem)
    return interval, mem, maps

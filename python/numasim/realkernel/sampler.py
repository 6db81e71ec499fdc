"""The VM runner's own work, simulated beside the workload.

numaw's runner (workloads/runner.c) samples the guest while the workload runs: every
`sample_interval_ms` it reads /proc/vmstat and /proc/interrupts and writes its lines to the
console, and every `numa_maps_interval_ms` it reads every workload process's numa_maps, which
walks every page table entry. It is unpinned, so on a guest whose vCPUs the workload keeps
busy it is one task more for as long as it works: the load balancer moves a worker off its
node for it (tens of ms), and a move away from the preferred node resets the worker's scan
period (`update_scan_period`). `numasim validate` simulates it as a `sampler` workload
(the engine's workload/sampler.rs) with the costs below; the VM never runs that workload
(its runner is the real one).

Costs: a boot's own runner (vm.json `source.runner`: its CPU time and the wall time of its
samples and numa_maps reads) where the boot recorded it, else the medians measured in the
first four boots that did (numa01-thread-alloc-small-4k, 6.1 and 6.12, 2026-11-28).
"""

from __future__ import annotations

from numasim.realkernel import spec as specmod

# medians of 4 boots (6.1: 10.5, 12.5; 6.12: 9.7, 8.4 ms a sample; 39, 44, 35, 31 ms per GiB)
BUSY_MS = 10.1
MAPS_MS_PER_GIB = 37.0


def costs(runner: dict | None, elapsed_s: float | None, mapped_gib: float | None, maps_interval_s: float) -> tuple:
    """(busy_ms per sample, maps_ms_per_gib) from a boot's runner record: its CPU time split
    between samples and numa_maps reads in proportion to their wall time."""
    if not runner or not runner.get("samples") or not elapsed_s or not mapped_gib:
        return BUSY_MS, MAPS_MS_PER_GIB
    wall = runner["sample_wall_s"] + runner["mem_wall_s"] + runner.get("task_wall_s", 0.0)
    if wall <= 0 or runner["cpu_s"] <= 0:
        return BUSY_MS, MAPS_MS_PER_GIB
    share = runner["cpu_s"] / wall
    busy = runner["sample_wall_s"] * share / runner["samples"] * 1e3
    reads = max(1.0, elapsed_s / maps_interval_s)
    maps = runner["mem_wall_s"] * share / reads / mapped_gib * 1e3
    return busy, maps


def mapped_gib(vm_raw: dict) -> float | None:
    """The most memory the workload's processes mapped at once in a VM result (series.memory)."""
    m = (vm_raw.get("series") or {}).get("memory") or {}
    per: dict = {}
    for t, p in zip(m.get("time_s", []), m.get("pages", [])):
        per[t] = per.get(t, 0) + p
    return max(per.values()) / 262144 if per else None


def add(d: dict, vm_raw: dict | None = None) -> dict:
    """Append the runner as a `sampler` workload to scenario dict `d` (in place; returned),
    with the costs `vm_raw`'s runner measured, or the defaults."""
    interval_ms, _, maps_ms = specmod.sample_intervals(d)
    runner = ((vm_raw or {}).get("source") or {}).get("runner")
    elapsed = ((vm_raw or {}).get("times") or {}).get("elapsed_s")
    busy, per_gib = costs(runner, elapsed, mapped_gib(vm_raw or {}), maps_ms / 1e3)
    busy = min(busy, 0.9 * interval_ms)
    d.setdefault("workload", []).append({"kind": "sampler", "interval_s": interval_ms / 1e3, "busy_ms": round(busy, 3),
                                         "maps_ms_per_gib": round(per_gib, 3), "maps_interval_s": maps_ms / 1e3})
    return d

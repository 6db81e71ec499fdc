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
        if kind == "sampler":  # the runner itself (realkernel/sampler.py)
            continue
        if kind == "program":
            lines.append(program_line(i, w))
            continue
        keys = AUTONUMA_KEYS if AUTONUMA.match(kind) else KEYS.get(kind)
        if keys is None:
            raise RealKernelError(f"workload[{i}]: kind {kind!r} has no real-kernel program "
                                  f"(supported: numa01/numa02 family, {', '.join(KEYS)}, program)",
                                  loc=f"workload[{i}].kind")
        parts = [kind] + [f"{k}={_value(k, w[k])}" for k in keys if w.get(k) is not None]
        lines.append(" ".join(parts))
    size = sum(len(ln) + 1 for ln in lines)
    if size >= SPEC_MAX_BYTES:
        raise RealKernelError(f"the workloads' spec is {size} bytes: numaw's runner reads at most "
                              f"{SPEC_MAX_BYTES - 1} (a smaller program)", loc="workload")
    return lines


# ---------------------------------------------------------------- program

# `numaw program buffers=B,... processes=ITEM/ITEM/... start_s=S` (workloads/program.c): a
# buffer is SIZE_MIB:MAPPING:MADVISE; the items, in order, are `process` (parent, node, cpus),
# its main thread's ops, then for each thread group `thread` (count, node, cpus) and its ops;
# an op is its name and key=value fields, all separated by ':'; lists are comma-separated.
SPEC_MAX_BYTES = 1 << 16  # runner.c reads the spec into 64 KiB
PROGRAM_LIMITS = {"buffers": 16, "processes": 64, "threads": 4096}
STREAM_OPS = ("store", "load", "rmw")
STREAM_KEYS = ("buffer", "offset_mib", "size_mib", "stride", "passes", "duration_s")


def _field(key: str, v, loc: str) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float, list)):
        raise RealKernelError(f"{loc}: {key} = {v!r}: numaw takes a number or a list of numbers", loc=loc)
    if isinstance(v, list):
        if not v or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise RealKernelError(f"{loc}: {key} = {v!r}: numaw takes a non-empty list of integers", loc=loc)
        return f"{key}={','.join(str(x) for x in v)}"
    return f"{key}={repr(float(v)) if isinstance(v, float) else v}"


def _affinity(d: dict, loc: str) -> list:
    if d.get("node") is not None and d.get("cpus") is not None:
        raise RealKernelError(f"{loc}: node and cpus are both given", loc=loc)
    return [_field(k, d[k], loc) for k in ("node", "cpus") if d.get(k) is not None]


def _program_op(op: dict, loc: str) -> str:
    name = op.get("op")
    if name in STREAM_OPS:
        if (op.get("passes") is None) == (op.get("duration_s") is None):
            raise RealKernelError(f"{loc}: a {name} stream needs passes or duration_s (one of them)", loc=loc)
        fields = [_field(k, op[k], loc) for k in STREAM_KEYS if op.get(k) is not None]
    elif name == "set_mempolicy":
        mode = op.get("mode", "default")
        if mode not in ("default", "bind", "preferred"):
            raise RealKernelError(f"{loc}: set_mempolicy mode {mode!r}: numaw knows default, bind and preferred",
                                  loc=loc)
        fields = [f"mode={mode}"] + ([_field("nodes", op["nodes"], loc)] if op.get("nodes") else [])
    elif name == "affinity":
        fields = _affinity(op, loc)
    elif name == "sleep":
        fields = [_field("duration_s", op.get("duration_s"), loc)]
    else:
        raise RealKernelError(f"{loc}: op {name!r} has no real-kernel counterpart "
                              f"(numaw: {', '.join(STREAM_OPS)}, set_mempolicy, affinity, sleep)", loc=loc)
    return ":".join([name, *fields])


def program_line(i: int, w: dict) -> str:
    """The `numaw program` line of a resolved `program` workload."""
    loc = f"workload[{i}]"
    buffers, processes = w.get("buffers") or [], w.get("processes") or []
    threads = sum(int(t.get("count") or 1) for p in processes for t in p.get("threads") or [])
    for what, n, least in (("buffers", len(buffers), 1), ("processes", len(processes), 1), ("threads", threads, 0)):
        if not least <= n <= PROGRAM_LIMITS[what]:
            raise RealKernelError(f"{loc}: {n} {what}: numaw runs {least} to {PROGRAM_LIMITS[what]}", loc=loc)
    bufs = []
    for b, buf in enumerate(buffers):
        mapping, madvise = buf.get("mapping") or "private", buf.get("madvise") or "none"
        if mapping not in ("private", "shared", "shmem") or madvise not in ("none", "hugepage", "nohugepage"):
            raise RealKernelError(f"{loc}.buffer[{b}]: mapping {mapping!r}, madvise {madvise!r}: numaw maps private, "
                                  "shared or shmem buffers, madvise none, hugepage or nohugepage",
                                  loc=f"{loc}.buffer[{b}]")
        if mapping != "private" and madvise != "none":
            raise RealKernelError(f"{loc}.buffer[{b}]: madvise {madvise!r} on a {mapping} buffer: numaw madvises "
                                  "private buffers only", loc=f"{loc}.buffer[{b}]")
        size = buf.get("size_mib")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise RealKernelError(f"{loc}.buffer[{b}]: size_mib {size!r}: numaw takes a whole number of MiB, "
                                  "at least 1", loc=f"{loc}.buffer[{b}]")
        bufs.append(f"{size}:{mapping}:{madvise}")
    items = []
    for k, proc in enumerate(processes):
        ploc = f"{loc}.process[{k}]"
        parent = proc.get("parent")
        if k == 0 and parent is not None:
            raise RealKernelError(f"{ploc}: process 0 is started, it has no parent", loc=ploc)
        if k and parent is not None and not (isinstance(parent, int) and 0 <= parent < k):
            raise RealKernelError(f"{ploc}: parent {parent!r}: must be an earlier process", loc=ploc)
        items.append(":".join(["process", *([f"parent={parent}"] if k and parent is not None else []),
                               *_affinity(proc, ploc)]))
        items += [_program_op(op, f"{ploc}.main[{j}]") for j, op in enumerate(proc.get("main") or [])]
        for g, group in enumerate(proc.get("threads") or []):
            gloc = f"{ploc}.thread[{g}]"
            items.append(":".join(["thread", f"count={int(group.get('count') or 1)}", *_affinity(group, gloc)]))
            items += [_program_op(op, f"{gloc}.ops[{j}]") for j, op in enumerate(group.get("ops") or [])]
    start = f" start_s={_value('start_s', w['start_s'])}" if w.get("start_s") is not None else ""
    return f"program buffers={','.join(bufs)} processes={'/'.join(items)}{start}"


# the tiering sysctls: scenario key in kernel.tiering -> (guest name, the kernel's default)
TIERING_SYSCTLS = {
    "promote_rate_limit_mbps": ("promote_rate_limit_MBps", 65536),
    "hot_threshold_ms": ("hot_threshold_ms", 1000),
    "demotion_enabled": ("demotion_enabled", False),
    "watermark_scale_factor": ("watermark_scale_factor", 10),
}


# where a guest or host kernel has each tiering setting (the first path that exists; the hot
# threshold is in debugfs from 6.1, a sysctl in some later trees)
TIERING_PATHS = {
    "promote_rate_limit_MBps": ["/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps"],
    "hot_threshold_ms": ["/sys/kernel/debug/sched/numa_balancing/hot_threshold_ms",
                         "/proc/sys/kernel/numa_balancing_hot_threshold_ms"],
    "demotion_enabled": ["/sys/kernel/mm/numa/demotion_enabled"],
    "watermark_scale_factor": ["/proc/sys/vm/watermark_scale_factor"],
}


def balancing_mode(kernel: dict) -> int:
    """kernel.numa_balancing as the sysctl's bits (0-3): the resolved scenario keeps the mode
    in kernel.tiering.mode (2 and 3 are memory tiering); a bare bool is 0 or 1."""
    tiering = kernel.get("tiering") or {}
    if "mode" in tiering:
        return int(tiering["mode"])
    nb = kernel.get("numa_balancing", True)
    return int(nb) if not isinstance(nb, bool) else (1 if nb else 0)


def tiering_settings(kernel: dict) -> dict:
    """The tiering sysctls the guest is given (guest name -> value): all of them in tiering
    mode (numa_balancing 2 or 3), else only those the scenario moved off the kernel's default
    (a VM of a normal-balancing scenario keeps the kernel's own)."""
    tiering = kernel.get("tiering") or {}
    tiered = balancing_mode(kernel) & 2
    out = {}
    for key, (name, default) in TIERING_SYSCTLS.items():
        if key in tiering and (tiered or tiering[key] != default):
            v = tiering[key]
            out[name] = int(v) if isinstance(v, bool) else v
    return out


def kernel_settings(resolved: dict) -> dict:
    """The guest settings: sysctl kernel.numa_balancing (its bits: 2 and 3 are memory tiering),
    the scan tunables, the tiering sysctls, THP."""
    k = resolved["kernel"]
    sc = k.get("sysctl", {})
    thp = k.get("thp", {})
    sizes = thp.get("sizes") or []
    mthp = {THP_SIZES_KB[i]: s for i, s in enumerate(sizes) if i >= 2 and i < len(THP_SIZES_KB)}
    return {
        "numa_balancing": balancing_mode(k),
        "scan_delay_ms": sc.get("numa_balancing_scan_delay_ms", 1000),
        "scan_period_min_ms": sc.get("numa_balancing_scan_period_min_ms", 1000),
        "scan_period_max_ms": sc.get("numa_balancing_scan_period_max_ms", 60000),
        "scan_size_mb": sc.get("numa_balancing_scan_size_mb", 256),
        "tiering": tiering_settings(k),
        "thp_enabled": thp.get("enabled", "never"),
        "mthp": mthp,
        "hz": k.get("hz", 250),
    }


def _nearest_cpu_node(node: int, cpu_nodes: list, distance: list) -> int:
    """The CPU node nearest to a memory-only node (SLIT distance; the lowest id on a tie): its
    HMAT initiator, as the simulator takes its latency from it."""
    return min(cpu_nodes, key=lambda c: (distance[c][node], c))


def topology(resolved: dict) -> dict:
    """Nodes, CPUs and memory of the machine, for -numa options: the nodes with CPUs have the
    same number each, numbered node by node; a node with no CPUs is memory only (its HMAT
    initiator is its nearest CPU node). With machine.hmat, `hmat` holds the latency (ns) from
    every CPU node to every node and each node's bandwidth (GiB/s) of the cost profile."""
    machine = resolved["machine"]
    topo = machine["topology"]
    node_cpus = topo["node_cpus"]
    n = topo["nr_nodes"]
    cpu_nodes = [i for i, c in enumerate(node_cpus) if c]
    counts = {len(node_cpus[i]) for i in cpu_nodes}
    if len(counts) != 1:
        raise RealKernelError("the VM needs the same number of CPUs on every node that has CPUs",
                              loc="machine.cpus_per_node")
    per = counts.pop()
    smt = int(topo.get("smt", 1))
    for k, node in enumerate(cpu_nodes):
        if node_cpus[node] != list(range(k * per, (k + 1) * per)):
            raise RealKernelError("the VM numbers CPUs node by node; this topology interleaves them",
                                  loc="machine.topology")
    types = machine.get("memory_type") or []
    if isinstance(types, str):
        types = [types] * n
    kmem = [i for i, t in enumerate(types) if t == "kmem"]
    if kmem:
        raise RealKernelError(f"node {kmem[0]} is kmem (dax/kmem device memory): the VM has no device-dax memory "
                              "to online; describe the slow node as memory_type \"dram\" with machine.hmat = true",
                              loc="machine.memory_type")
    mem_mib = [int(p) * 4096 // (1 << 20) for p in topo["node_pages"]]
    out = {"nodes": n, "cpus_per_node": per, "smt": smt, "mem_mib": mem_mib, "distance": topo["distance"]}
    if len(cpu_nodes) < n:
        out["cpu_nodes"] = cpu_nodes
        out["initiator"] = {i: _nearest_cpu_node(i, cpu_nodes, topo["distance"]) for i in range(n) if i not in cpu_nodes}
    if machine.get("hmat"):
        cost = machine["cost"]
        out["hmat"] = {"latency_ns": cost["latency_ns"], "bandwidth_gibps": cost["node_bandwidth_gibps"]}
    return out


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


def place_interval(resolved: dict, mem_ms: int) -> int:
    """How often the runner maps where each process's buffers are (`place` lines, the
    simulator's series.placement; 0: never): in tiering runs (kernel.numa_balancing 2, 3) at
    the placement interval, as the hot set's share of the fast tier is read from them. It calls
    move_pages(2) on every page of the buffers, a CPU the workload loses, so it is off otherwise."""
    if not balancing_mode(resolved["kernel"]) & 2:
        return 0
    return max(int(resolved.get("run", {}).get("placement_interval_ms", 1000)) or 1000, mem_ms)


# Room for what the guest kernel itself holds on a node when the run starts (its image, struct
# pages, the initramfs, the trace buffers), which the simulator does not have: it starts with
# every page free. Measured with the init script's `reserve` line (docs/realkernel.md, "Memory
# tiering"): 73-102 MiB of the boot node, 14-63 MiB of the other, by release and boot.
GUEST_MIB = {"boot": 128, "cpu": 96, "memory_only": 96}


def guest_memory(topo: dict, resolved: dict) -> dict:
    """In tiering runs the free memory of each node decides promotion (watermarks) and
    demotion, so the VM's node is the scenario's plus room for the guest kernel (GUEST_MIB),
    and the init script takes back what is free beyond the scenario's node size as 2 MiB
    huge pages (the hugetlb pool, which reclaim leaves alone): every node starts with the
    scenario's memory free. Adds "vm_mib" (the QEMU node sizes) and "free_mib" (the
    target) to a copy of `topo`; other runs are left as they are."""
    if not balancing_mode(resolved["kernel"]) & 2:
        return topo
    cpu_nodes = topo.get("cpu_nodes", list(range(topo["nodes"])))
    # node 0's memory comes first in the guest's physical map: the kernel image and the
    # initramfs are there
    extra = [GUEST_MIB["boot"] if i == 0 else GUEST_MIB["cpu" if i in cpu_nodes else "memory_only"]
             for i in range(topo["nodes"])]
    return {**topo, "vm_mib": [m + e for m, e in zip(topo["mem_mib"], extra)], "free_mib": list(topo["mem_mib"])}


STREAM_S_PER_MIB = 0.05  # a guess at a stream pass's guest time per MiB under TCG, for the time budget


def program_duration_s(w: dict) -> float:
    """A rough length of a `program` (for the VM's time limit): its longest chain of ops, a
    process's ancestors' main ops, its own, then its longest thread; a stream of `passes`
    counted at STREAM_S_PER_MIB."""
    def ops_s(ops) -> float:
        t = 0.0
        for op in ops or []:
            if op.get("duration_s") is not None:
                t += float(op["duration_s"])
            elif op.get("passes") is not None:
                t += int(op["passes"]) * float(op.get("size_mib") or 0) / max(int(op.get("stride") or 1), 1) \
                    * STREAM_S_PER_MIB
        return t
    procs = w.get("processes") or []
    ready = []  # when each process's main thread has run its main ops
    longest = 0.0
    for k, p in enumerate(procs):
        parent = 0 if p.get("parent") is None else p["parent"]
        start = ready[parent] if k and isinstance(parent, int) and 0 <= parent < k else 0.0
        ready.append(start + ops_s(p.get("main")))
        longest = max([longest, ready[k]] + [ready[k] + ops_s(g.get("ops")) for g in p.get("threads") or []])
    return longest

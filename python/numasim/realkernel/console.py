"""Parse the `@nsw` lines that `numaw run` prints (on a VM's serial console or a host's
stdout) and turn them into a result in the simulator's format (numasim.Result).

Lines without the `@nsw ` prefix (kernel messages, shell noise) are ignored; a line the
kernel cut in the middle of is skipped rather than trusted.
"""

from __future__ import annotations

import json
import math
import re

from numasim.realkernel.errors import RealKernelError
from numasim.result import Result

PREFIX = "@nsw "
_KV = re.compile(r"(\S+?)=(\S*)")

# event counters a result carries (their deltas over the run); gauges are left out
EVENT_PREFIXES = ("numa_", "pgmigrate_", "thp_", "nr_tlb_", "pgalloc_", "compact_", "pgpromote_", "pgdemote_")
EVENT_NAMES = {"pgfault", "pgmajfault", "pgfree", "pgsteal_kswapd", "pgscan_kswapd"}
GAUGES = {"numa_hint_faults_local_pct"}


# Tags whose fields are kept as one record under the tag's name.
RECORD_TAGS = ("boot", "clock", "begin", "settings", "timeout", "end", "done")

def _num(v: str):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


# Fields that hold addresses in hex without 0x ("4e6000" would read as a float): kept as text.
HEX_FIELDS = frozenset({"start", "vm_start", "vm_end", "numa_scan_offset"})


def _fields(rest: str) -> dict:
    return {k: v if k in HEX_FIELDS else _num(v) for k, v in _KV.findall(rest)}


def parse_console(text: str) -> dict:
    """Group the `@nsw` records of one run.

    Returns {"boot": {...}, "begin": {...}, "settings": {...}, "vmstat_begin": {...},
    "vmstat_end": {...}, "samples": [{t, counters}], "irq": [(t, [per cpu])],
    "mem": [(t, w, pid, [pages per node])], "starts": {w: {...}}, "exits": {w: {...}},
    "calls": [...], "workload_lines": [...], "errors": [...], "warnings": [...],
    "tasks": [{t, w, pid, tid, cpu, node, pref, grp, seq, ...}], "trace": [{ts, event, ...}],
    "skipvma": {reason: n}, "lrumove": [{comm, cpu, s, calls, folios}], "kprof": {"rows": [{sym, hits}], total, unresolved, step}, "irqs": {phase: {name: [per cpu]}}, "vmas": [{t, w, pid, start, kib, perm, name, n0, n1, ...}],
    "timeout": {...} | None, "end": {...} | None, "panic": str | None, "done": {...} | None}."""
    out = {"boot": {}, "clock": None, "begin": None, "settings": {}, "vmstat_begin": None, "vmstat_end": None,
           "samples": [], "irq": [], "mem": [], "starts": {}, "exits": {}, "calls": [],
           "workload_lines": [], "errors": [], "warnings": [], "timeout": None, "end": None,
           "panic": None, "done": None, "skipped": 0, "tasks": [], "trace": [], "skipvma": {}, "vmas": [],
           "tracecount": {}, "lrumove": [], "kprof": {}, "irqs": {}, "calibration": {}, "tiers": {}, "demotion": {}, "nodefree": [], "pcp": {}, "place": [], "reserve": []}
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if out["panic"] is None and ("Kernel panic" in line or "BUG: kernel NULL" in line):
            out["panic"] = line.strip()
        i = line.find(PREFIX)
        if i < 0:
            continue
        body = line[i + len(PREFIX):].strip()
        tag, _, rest = body.partition(" ")
        w = None
        if tag.startswith("w=") and tag[2:].isdigit():  # a workload's own line: "w=N TAG ..."
            w = int(tag[2:])
            tag, _, rest = rest.partition(" ")
        try:
            f = _fields(rest)
        except Exception:  # pragma: no cover - regex findall does not raise
            out["skipped"] += 1
            continue
        if w is not None and tag != "call":
            out["workload_lines"].append({"w": w, "tag": tag, "line": rest, **f})
        elif tag in RECORD_TAGS:  # one record each: the last one wins
            out[tag] = f
        elif tag == "vmstat":
            phase = f.pop("phase", None)
            f.pop("t", None)
            out["vmstat_begin" if phase == "begin" else "vmstat_end"] = f
        elif tag == "v":
            t = f.pop("t", None)
            if not isinstance(t, (int, float)) or not f:
                out["skipped"] += 1
                continue
            out["samples"].append({"t": float(t), "counters": f})
        elif tag == "irq":
            try:
                per = [int(x) for x in str(f["tlb"]).split(",")]
            except (KeyError, ValueError):
                out["skipped"] += 1
                continue
            out["irq"].append((float(f["t"]), per))
        elif tag == "mem":
            nodes = sorted((int(k[1:]), v) for k, v in f.items() if re.fullmatch(r"n\d+", k))
            if "t" not in f or "pid" not in f or not nodes:
                out["skipped"] += 1
                continue
            out["mem"].append((float(f["t"]), int(f["w"]), int(f["pid"]), [int(v) for _, v in nodes]))
        elif tag == "task":
            if not all(isinstance(f.get(k), (int, float)) for k in ("t", "pid", "tid", "node")):
                out["skipped"] += 1
                continue
            out["tasks"].append(f)
        elif tag == "trace":
            if not isinstance(f.get("ts"), (int, float)) or "event" not in f:
                out["skipped"] += 1
                continue
            out["trace"].append(f)
        elif tag == "tier":  # a memory tier of the guest and its nodes (sysfs nodelist)
            out["tiers"][int(f["id"])] = node_list(str(f.get("nodes", "")))
        elif tag == "demotion":  # "Demotion targets for Node N" of the boot log (the last one wins)
            out["demotion"][int(f["node"])] = {"preferred": node_list(str(f.get("preferred", ""))),
                                               "fallback": node_list(str(f.get("fallback", "")))}
        elif tag == "reserve":  # a node's free memory made the scenario's (tiering runs)
            out["reserve"].append(f)
        elif tag == "nodefree":
            try:
                out["nodefree"].append((float(f["t"]), [int(x) for x in str(f["kb"]).split(",")]))
            except (KeyError, ValueError):
                out["skipped"] += 1
        elif tag == "pcp":  # free pages on the per-CPU lists, which MemFree leaves out
            try:
                out["pcp"][float(f["t"])] = [int(x) for x in str(f["kb"]).split(",")]
            except (KeyError, ValueError):
                out["skipped"] += 1
        elif tag == "place":
            per = {int(k[1:]): v for k, v in f.items() if re.fullmatch(r"n\d+", k)}
            try:
                per = {n: [int(x) for x in str(v).split(",")] for n, v in per.items()}
                out["place"].append({"t": float(f["t"]), "w": int(f["w"]), "pid": int(f["pid"]), "nodes": per})
            except (KeyError, ValueError):
                out["skipped"] += 1
        elif tag == "vma":
            out["vmas"].append(f)
        elif tag in ("sd", "llc"):
            out.setdefault("topology", []).append({"kind": tag, **f})
        elif tag == "cal":  # `numaw calibrate`: one or more measurements per line
            out["calibration"].update({k: v for k, v in f.items()
                                      if isinstance(v, (int, float)) and math.isfinite(v)})
        elif tag == "faultagg":  # `validate --trace-faults`: hint faults per thread, 10 ms and kind
            if not isinstance(f.get("ts"), (int, float)) or not isinstance(f.get("n"), int):
                out["skipped"] += 1
                continue
            out.setdefault("faultagg", []).append(f)
        elif tag == "tracecount":
            out["tracecount"][str(f.get("event"))] = int(f.get("n", 0))
        elif tag == "skipvma":
            out["skipvma"][str(f.get("reason"))] = int(f.get("n", 0))
        elif tag == "lrumove":
            out["lrumove"].append({k: f.get(k) for k in ("comm", "cpu", "s", "calls", "folios")})
        elif tag == "kprof":  # booted with profile=2: a kernel function's kernel-mode ticks (kprofile.c)
            if not isinstance(f.get("hits"), int):
                out["skipped"] += 1
                continue
            out["kprof"].setdefault("rows", []).append({"sym": str(f.get("sym")), "hits": f["hits"]})
        elif tag == "khist":  # `--kernel-profile`: the clocksource reads' hist triggers, as printed
            out["kprof"].setdefault("clock_read_hist", []).append(rest)
        elif tag == "kprof_total":
            out["kprof"].update({k: f[k] for k in ("hits", "unresolved", "step") if isinstance(f.get(k), int)})
        elif tag == "irqs":  # a named /proc/interrupts or /proc/softirqs row, per CPU
            counts = [int(x) for x in str(f.get("counts", "")).split(",") if x.strip().lstrip("-").isdigit()]
            out["irqs"].setdefault(str(f.get("phase")), {})[str(f.get("name"))] = counts
        elif tag == "start":
            out["starts"][int(f["w"])] = f
        elif tag == "exit":
            out["exits"][int(f["w"])] = f
        elif tag == "call":
            what, _, rest2 = rest.partition(" ")
            out["calls"].append({"w": w, "call": what, **_fields(rest2)})
        elif tag == "error":
            out["errors"].append(rest)
        elif tag == "warn":
            out["warnings"].append(rest)
        else:
            out["skipped"] += 1
    return out


def node_list(text: str) -> list:
    """A kernel node list ("0-1,3"; "-" or "" for none) as a list of ints."""
    nodes = []
    for part in text.split(","):
        part = part.strip()
        if not part or part == "-":
            continue
        a, _, b = part.partition("-")
        nodes += list(range(int(a), int(b or a) + 1))
    return nodes


def memory_tiers(p: dict, scenario: dict) -> dict | None:
    """The guest's memory tiers in the simulator's terms (result.sim.memory_tiers): per node
    its tier id (memory_tierN: N = abstract distance >> 7), whether it is top tier (its tier is
    no slower than the slowest tier holding CPUs: node_is_toptier) and its preferred demotion
    targets; None when the guest printed no tiers (before 6.1, or no sysfs)."""
    if not p.get("tiers"):
        return None
    topo = (scenario.get("machine") or {}).get("topology") or {}
    n = int(topo.get("nr_nodes") or 1 + max(x for ns in p["tiers"].values() for x in ns))
    tier = [None] * n
    for tid, nodes in p["tiers"].items():
        for x in nodes:
            if 0 <= x < n:
                tier[x] = tid
    cpu_nodes = [i for i, c in enumerate(topo.get("node_cpus") or [[0]] * n) if c]
    top = max((tier[i] for i in cpu_nodes if tier[i] is not None), default=None)
    return {"tier": tier,
            "toptier": [t is None or top is None or t <= top for t in tier],
            "demotion": [p["demotion"].get(i, {}).get("preferred", []) for i in range(n)],
            "demotion_fallback": [p["demotion"].get(i, {}).get("fallback", []) for i in range(n)]}


def placement_series(p: dict) -> tuple:
    """series.placement (time_s, pid, bucket, node, pages; the non-empty cells, as the
    simulator) from the runner's `place` lines, and {pid: workload index}."""
    cols = {"time_s": [], "pid": [], "bucket": [], "node": [], "pages": []}
    owner = {}
    for r in p.get("place", []):
        owner[str(r["pid"])] = r["w"]
        for node, counts in sorted(r["nodes"].items()):
            for b, pages in enumerate(counts):
                if pages > 0:
                    cols["time_s"].append(round(r["t"], 6))
                    cols["pid"].append(r["pid"])
                    cols["bucket"].append(b)
                    cols["node"].append(node)
                    cols["pages"].append(pages)
    cols["buckets"] = max((len(c) for r in p.get("place", []) for c in r["nodes"].values()), default=64)
    return cols, owner


def missing_settings(warnings: list) -> list:
    """The settings the guest kernel lacks (the init script's `warn missing=PATH`)."""
    return [w.split("=", 1)[1] for w in warnings if w.startswith("missing=")]


def is_event_counter(name: str) -> bool:
    return (name.startswith(EVENT_PREFIXES) or name in EVENT_NAMES) and name not in GAUGES


def check_complete(p: dict, where: str = "guest") -> None:
    """Raise RealKernelError when the run did not finish: panic, runner error, no end record."""
    if p["panic"]:
        raise RealKernelError(f"{where}: kernel panic: {p['panic']}")
    if p["errors"]:
        raise RealKernelError(f"{where}: workload error: {p['errors'][0]}")
    bad = {w: e for w, e in p["exits"].items() if e.get("status") != 0 and not p["timeout"]}
    if bad:
        w, e = next(iter(bad.items()))
        raise RealKernelError(f"{where}: workload {w} exited with status {e.get('status')} "
                              f"(signal {e.get('signal')})")
    if p["begin"] is None:
        raise RealKernelError(f"{where}: the runner never started (no '@nsw begin' line)")
    if p["end"] is None or p["vmstat_end"] is None:
        raise RealKernelError(f"{where}: the run did not finish (no '@nsw end' line)")


def build_result(p: dict, scenario: dict, source: dict, seed=None) -> Result:
    """A Result in the simulator's format from a parsed run.

    counters: deltas of the event counters between the begin and end snapshots;
    series.vmstat: the sampled counters minus the begin snapshot; series.memory: anonymous
    pages per (time, pid, node) from numa_maps; interrupts.TLB: per-CPU deltas of the
    /proc/interrupts TLB line; times: elapsed (last workload exit), user and system (rusage)."""
    check_complete(p, source.get("kind", "guest"))
    v0, v1 = p["vmstat_begin"], p["vmstat_end"]
    counters = {}
    for name, end in v1.items():
        if is_event_counter(name) and isinstance(end, int) and isinstance(v0.get(name), int):
            d = end - v0[name]
            if d >= 0:
                counters[name] = d
    base = p["samples"][0]["counters"] if p["samples"] else {}
    names = sorted(n for n in base if n in counters)
    series = {"time_s": []}
    for n in names:
        series[n] = []
    last_t = -1.0
    for s in p["samples"][1:]:
        if s["t"] <= last_t or any(n not in s["counters"] for n in names):
            continue
        last_t = s["t"]
        series["time_s"].append(round(s["t"], 6))
        for n in names:
            series[n].append(min(max(s["counters"][n] - base[n], 0), counters[n]))
    memory = {"time_s": [], "pid": [], "node": [], "pages": []}
    for t, _w, pid, nodes in p["mem"]:
        for node, pages in enumerate(nodes):
            memory["time_s"].append(round(t, 6))
            memory["pid"].append(pid)
            memory["node"].append(node)
            memory["pages"].append(pages)
    interrupts = {}
    if len(p["irq"]) >= 2:
        first, last = p["irq"][0][1], p["irq"][-1][1]
        per = [b - a for a, b in zip(first, last)]
        interrupts["TLB"] = {"per_cpu": per, "total": sum(per)}
    processes, user, system = [], 0.0, 0.0
    extra = {}
    for wl in p["workload_lines"]:
        if "throughput_aps" in wl:
            extra.setdefault(wl["w"], {}).setdefault("throughput_aps", 0.0)
            extra[wl["w"]]["throughput_aps"] += float(wl["throughput_aps"])
        if "passes" in wl:  # remote_toucher processes=2: one line per process, summed
            extra.setdefault(wl["w"], {}).setdefault("passes", 0)
            extra[wl["w"]]["passes"] += wl["passes"]
    for w in sorted(p["exits"]):
        e, s = p["exits"][w], p["starts"].get(w, {})
        user += float(e.get("user_s", 0))
        system += float(e.get("sys_s", 0))
        processes.append({
            "workload": w, "pid": e.get("pid"), "comm": s.get("kind", "?"),
            "elapsed_s": round(float(e.get("t", 0)) - float(s.get("t", 0)), 6),
            "user_s": float(e.get("user_s", 0)), "system_s": float(e.get("sys_s", 0)),
            "threads": e.get("threads", 0), "minflt": e.get("minflt", 0), **extra.get(w, {}),
        })
    failed = [c for c in p["calls"] if isinstance(c.get("ret"), int) and c["ret"] < 0]
    if failed:  # e.g. ESRCH: the target exited before the driver's last call
        source = {**source, "warnings": list(source.get("warnings", [])) + [
            f"{len(failed)} of {len(p['calls'])} {failed[0]['call']} calls failed "
            f"(first: errno {failed[0].get('errno')} at t={failed[0].get('t')} s)"]}
    tasks_series, scan_seq = task_series(p)
    elapsed = float(p["end"].get("elapsed_s", 0))
    end = p["end"]
    if p.get("clock"):  # the guest's clocksource, and whether it found the TSC unstable
        source = {**source, "clock": p["clock"]}
    if p.get("calibration"):  # `numaw calibrate` ran in this boot before the workload
        source = {**source, "calibration": p["calibration"]}
    if p.get("topology"):  # the guest's sched domains and LLC sharing, as the kernel built them
        source = {**source, "topology": p["topology"]}
    if "runner_user_s" in end:  # the runner's own CPU: it shares the CPUs with the workload
        source = {**source, "runner": {
            "samples": int(end.get("samples", 0)), "sample_wall_s": float(end.get("sample_wall_s", 0)),
            "mem_wall_s": float(end.get("mem_wall_s", 0)), "task_wall_s": float(end.get("task_wall_s", 0)),
            "cpu_s": round(float(end["runner_user_s"]) + float(end.get("runner_sys_s", 0)), 3)}}
    # each thread as last seen (the runner reads the threads every placement interval)
    last = {}
    for r in p.get("tasks", []):
        last[int(r["tid"])] = r
    tasks = [{"pid": tid, "tgid": int(r["pid"]), "node": int(r["node"]), "preferred_nid": r.get("pref"),
              "numa_pages_migrated": r.get("migrated")} for tid, r in sorted(last.items())]
    placement, placement_owner = placement_series(p)
    node_free = {"time_s": [], "node": [], "kib": []}
    pcp = p.get("pcp") or {}
    if pcp:
        node_free["pcp_kib"] = []
    for t, kbs in p.get("nodefree", []):
        for node, kb in enumerate(kbs):
            node_free["time_s"].append(round(t, 6))
            node_free["node"].append(node)
            node_free["kib"].append(kb)
            if pcp:
                at = pcp.get(t) or [None] * len(kbs)
                node_free["pcp_kib"].append(at[node] if node < len(at) else None)
    if p.get("reserve"):  # the guest kernel's own memory per node, and what the run started with
        source = {**source, "guest_reserve": p["reserve"]}
        short = [r for r in p["reserve"] if r.get("free_after_kb", 0) < r.get("want_kb", 0) - 4096]
        if short:
            source = {**source, "warnings": list(source.get("warnings", [])) + [
                f"node {r.get('node')} started with {r.get('free_after_kb', 0) // 1024} MiB free, "
                f"the scenario's node has {r.get('want_kb', 0) // 1024} MiB" for r in short]}
    traced = sum(int(f.get("n", 0)) for f in p.get("faultagg", []))
    if p.get("faultagg") and traced < 0.98 * counters.get("numa_hint_faults", 0):
        # the trace ring buffer overwrote its oldest events: the counts are incomplete
        source = {**source, "warnings": list(source.get("warnings", [])) + [
            f"fault_kinds holds {traced} of the run's {counters.get('numa_hint_faults', 0)} hint faults "
            "(the trace buffer overflowed): per-pass counts are incomplete"]}
    missing = missing_settings(p.get("warnings", []))
    if missing:  # written by the init script and absent from this kernel: named, not dropped
        source = {**source, "missing_settings": missing}
    raw = {
        "source": source,
        "memory_tiers": memory_tiers(p, scenario),
        "placement_workload": placement_owner,
        "tasks": tasks,
        "completed": bool(p["end"].get("completed", 1)) and p["timeout"] is None,
        "counters": counters,
        "times": {"elapsed_s": elapsed, "system_s": system, "user_s": user},
        "series": {"vmstat": series, "memory": memory, "tasks": tasks_series, "scan_seq": scan_seq,
                   "placement": placement, "node_free": node_free},
        "numa_events": numa_events(p, scenario),
        "skip_vma": p.get("skipvma", {}),
        "vmas": p.get("vmas", []),
        "trace_counts": p.get("tracecount", {}),
        "lru_moves": p.get("lrumove", []),
        # every named interrupt and softirq row at the run's begin and end, per CPU
        "interrupt_rows": p.get("irqs", {}),
        "kernel_profile": p.get("kprof", {}),
        "interrupts": interrupts,
        "processes": processes,
        "syscalls": p["calls"],
        "settings": p["settings"],
        "scenario": scenario,
        "seed": seed if seed is not None else scenario.get("seed"),
    }
    if "faultagg" in p:  # `validate --trace-faults`, as the simulator's run.trace_faults: the workload's threads
        raw["fault_kinds"] = [r for r in fault_kinds(p) if r["task"] in last]
        raw["scan_windows"] = [w for w in scan_windows(p) if w["task"] in last]
    return Result(json.dumps(raw, indent=1, sort_keys=True))


def task_series(p: dict):
    """series.tasks (time_s, tid, pid, cpu_node, preferred_nid) and series.scan_seq (time_s,
    pid, seq: the mm's numa_scan_seq) from the runner's `task` lines, in the simulator's
    columns. The runner prints a thread when something changed and at least once a second."""
    tasks = {"time_s": [], "tid": [], "pid": [], "cpu_node": [], "preferred_nid": []}
    seq = {"time_s": [], "pid": [], "seq": []}
    last_seq = {}
    for r in p.get("tasks", []):
        t = round(float(r["t"]), 6)
        tasks["time_s"].append(t)
        tasks["tid"].append(int(r["tid"]))
        tasks["pid"].append(int(r["pid"]))
        tasks["cpu_node"].append(int(r["node"]))
        tasks["preferred_nid"].append(int(r.get("pref", -1)))
        sq = r.get("seq")
        if isinstance(sq, int) and sq >= 0 and last_seq.get(r["pid"]) != sq:
            last_seq[r["pid"]] = sq
            seq["time_s"].append(t)
            seq["pid"].append(int(r["pid"]))
            seq["seq"].append(sq)
    return tasks, seq


def fault_kinds(p: dict) -> list:
    """`validate --trace-faults`: the hint faults (task_numa_fault calls) of each thread per
    10 ms from the runner's start, by kind: local (TNF_FAULT_LOCAL), whose pid the page's
    last_cpupid held before (first: none, own, other), migrated, failed."""
    epoch = (p.get("begin") or {}).get("epoch")
    if not isinstance(epoch, (int, float)):
        return []
    rows = [{"t": round(float(f["ts"]) - epoch, 3), "task": f.get("task"), "local": f.get("local"),
             "last": f.get("last"), "migrated": f.get("migrated"), "failed": f.get("failed"), "n": f["n"]}
            for f in p.get("faultagg", [])]
    return sorted(rows, key=lambda r: (r["t"], str(r["task"]), str(r["last"]), str(r["local"])))


def _release(p: dict) -> tuple:
    """(major, minor) of the guest kernel, (0, 0) when unknown."""
    m = re.match(r"(\d+)\.(\d+)", str((p.get("begin") or {}).get("release") or (p.get("boot") or {}).get("release") or ""))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def scan_windows(p: dict) -> list:
    """`validate --trace-faults`: each task_numa_work call of the workloads (entry and return,
    from the runner's start) with the calling thread's numa_scan_seq and numa_scan_period as
    it entered. They are read at fixed offsets before p->numa_work in task_struct: 52 and 48
    bytes before 6.9, 48 and 44 since (`u8 il_weight` joined the NUMA fields above them)."""
    epoch = (p.get("begin") or {}).get("epoch")
    if not isinstance(epoch, (int, float)):
        return []
    seq_key, period_key = ("w48", "w44") if _release(p) >= (6, 9) else ("w52", "w48")
    out, open_ = [], {}
    for r in p.get("trace", []):
        if r.get("event") == "numa_work":
            open_[r.get("task")] = r
        elif r.get("event") == "numa_work_end" and r.get("task") in open_:
            s = open_.pop(r.get("task"))
            out.append({"t": round(float(s["ts"]) - epoch, 6), "end": round(float(r["ts"]) - epoch, 6),
                        "task": s.get("task"), "seq": s.get(seq_key), "period_ms": s.get(period_key)})
    return out


def numa_events(p: dict, scenario: dict) -> list:
    """The NUMA-balancing tracepoints of the run, with times from the runner's start:
    move_numa / swap_numa / stick_numa (task_numa_migrate's decisions), migrate_task (every
    move of a workload thread, the load balancer's included) and wakeup_new (the CPU a new
    thread or process starts on), nodes filled in for the latter two."""
    epoch = (p.get("begin") or {}).get("epoch")
    if not isinstance(epoch, (int, float)):
        return []
    cpu_node = ((scenario.get("machine") or {}).get("topology") or {}).get("cpu_node") or []
    node = lambda c: cpu_node[c] if isinstance(c, int) and 0 <= c < len(cpu_node) else -1  # noqa: E731
    out = []
    for r in p.get("trace", []):
        e = {k: v for k, v in r.items() if k != "ts"}
        e["t"] = round(float(r["ts"]) - epoch, 6)
        if e["event"] == "migrate_task":
            e["src_nid"], e["dst_nid"] = node(e.get("orig_cpu")), node(e.get("dest_cpu"))
        elif e["event"] == "wakeup_new":
            e["dst_nid"] = node(e.get("target_cpu"))
        out.append(e)
    return out

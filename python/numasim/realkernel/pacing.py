"""What NUMA balancing decided over a run, from a simulated or a real-kernel result alike: scan
passes (each process's mm->numa_scan_seq) in a fixed time, counts per pass, failed hint-fault
migrations, and where each process's threads ran (series.tasks, numa_events).

A process's worker threads are its tasks other than the main thread (tid != pid): the main
thread of the workloads sleeps in pthread_join while they run.
"""

from __future__ import annotations

from collections import defaultdict

SEPARATED, TOGETHER, SPLIT = "separated", "together", "split"


def scan_seq_by_pid(result) -> dict:
    """{pid: [(time_s, seq), ...]} from series.scan_seq (changes only), processes whose scanner
    ran (seq reached 1)."""
    sq = (result.raw.get("series") or {}).get("scan_seq") or {}
    out = defaultdict(list)
    for t, pid, seq in zip(sq.get("time_s", []), sq.get("pid", []), sq.get("seq", [])):
        out[int(pid)].append((float(t), int(seq)))
    return {p: sorted(v) for p, v in out.items() if any(s > 0 for _, s in v)}


def passes_at(seqs: dict, t: float) -> float | None:
    """Mean over processes of the passes completed by time `t` (None without processes)."""
    if not seqs:
        return None
    vals = [max([s for ts, s in v if ts <= t] or [0]) for v in seqs.values()]
    return sum(vals) / len(vals)


def count_at(result, name: str, t: float | None) -> float:
    """Counter `name` at time `t`, from the last series.vmstat sample at or before it (the
    run's total when `t` is at or past its end, or when the counter is not sampled)."""
    total = result.counters.get(name, 0)
    sv = (result.raw.get("series") or {}).get("vmstat") or {}
    times, vals = sv.get("time_s") or [], sv.get(name) or []
    if t is None or not times or len(vals) != len(times) or t >= times[-1]:
        return total
    last = 0
    for ts, v in zip(times, vals):
        if ts > t:
            break
        last = v
    return last


def worker_nodes(result) -> list:
    """[(time_s, {pid: (node of each worker thread, in tid order)})] whenever it changes."""
    ts = (result.raw.get("series") or {}).get("tasks") or {}
    rows = sorted(zip(ts.get("time_s", []), ts.get("tid", []), ts.get("pid", []), ts.get("cpu_node", [])))
    state, out, last = {}, [], None
    for t, tid, pid, node in rows:
        if tid == pid:
            continue
        state[tid] = (pid, node)
        snap = defaultdict(list)
        for k in sorted(state):
            p, n = state[k]
            snap[p].append(n)
        snap = {p: tuple(v) for p, v in snap.items()}
        if snap != last:
            out.append((float(t), snap))
            last = snap
    return out


def placement_kind(snap: dict) -> str:
    """separated: every multi-threaded process on one node, each on a different node;
    together: every process on one node, sharing it; split: a process spans nodes."""
    nodes = []
    for v in snap.values():
        if len(set(v)) != 1:
            return SPLIT
        nodes.append(v[0])
    return SEPARATED if len(set(nodes)) == len(nodes) else TOGETHER


def placement(result, min_procs: int = 2) -> dict:
    """When the processes' threads settled and how: `initial` (the first time every worker
    exists), `final`, and `separated_s` (from when on they stayed separated; None if not at
    the end)."""
    tl = worker_nodes(result)
    if not tl:
        return {}
    full = max(sum(len(v) for v in s.values()) for _, s in tl)
    procs = max(len(s) for _, s in tl)
    if procs < min_procs:
        return {}
    initial = next((placement_kind(s) for _, s in tl if sum(len(v) for v in s.values()) == full), None)
    final = placement_kind(tl[-1][1])
    since = None
    for t, s in tl:
        if placement_kind(s) == SEPARATED:
            since = t if since is None else since
        else:
            since = None
    return {"initial": initial, "final": final, "separated_s": since}


def workers_per_node(snap: dict) -> str:
    """How many worker threads run on each node, in node order: "0:2 1:1"."""
    count = defaultdict(int)
    for v in snap.values():
        for n in v:
            count[n] += 1
    return " ".join(f"{n}:{count[n]}" for n in sorted(count))


def cross_node_moves(result) -> list:
    """Times (s) of the worker threads' cross-node moves by the scheduler (sched_migrate_task,
    the load balancer's and NUMA balancing's alike; wake-up placement of a new thread is not
    one)."""
    ts = (result.raw.get("series") or {}).get("tasks") or {}
    tgid_of = {int(t): int(p) for t, p in zip(ts.get("tid", []), ts.get("pid", []))}
    out = []
    for e in result.raw.get("numa_events") or []:
        if e.get("event") != "migrate_task" or e.get("src_nid") == e.get("dst_nid"):
            continue
        tid = e.get("pid")
        if tid is None or tid == e.get("tgid", tgid_of.get(tid)):
            continue  # a main thread
        out.append(float(e["t"]))
    return sorted(out)


def fork_nodes(result) -> dict:
    """{pid: (node each worker thread started on, in tid order)} from the sched_wakeup_new events
    (the kernel's fork and clone placement); a real kernel's events name the thread only, its
    process comes from series.tasks."""
    ts = (result.raw.get("series") or {}).get("tasks") or {}
    tgid_of = {int(t): int(p) for t, p in zip(ts.get("tid", []), ts.get("pid", []))}
    out = defaultdict(list)
    for e in sorted((e for e in result.raw.get("numa_events") or [] if e.get("event") == "wakeup_new"),
                    key=lambda e: e.get("pid", 0)):
        tid = e.get("pid")
        tgid = e.get("tgid", tgid_of.get(tid))
        if tgid is None or tid == tgid or not isinstance(e.get("dst_nid"), int) or e["dst_nid"] < 0:
            continue
        out[int(tgid)].append(e["dst_nid"])
    return {p: tuple(v) for p, v in out.items()}


def migrated_by_thread_node(result) -> dict:
    """{node: pages migrated by the hint faults of the worker threads last seen on that node}
    (p->numa_pages_migrated of each thread): which side of a shared buffer moved it."""
    out = defaultdict(int)
    for t in result.raw.get("tasks") or []:
        n, m = t.get("node"), t.get("numa_pages_migrated")
        if isinstance(n, int) and isinstance(m, int) and t.get("pid") != t.get("tgid"):
            out[n] += m
    return dict(sorted(out.items()))


def events(result) -> dict:
    """Counts of the NUMA tracepoints: move_numa, swap_numa, stick_numa, migrate_task."""
    c = defaultdict(int)
    for e in result.raw.get("numa_events") or []:
        c[e.get("event")] += 1
    return dict(c)


def migrate_fail_faults(result):
    """Hint faults whose migration failed (TNF_MIGRATE_FAIL): the simulator's count, or the
    VM's kprobe on task_numa_fault."""
    if "numa_fault_migrate_fail" in result.raw:
        return result.raw["numa_fault_migrate_fail"]
    counts = result.raw.get("trace_counts") or {}
    if "numa_fault_fail" in counts:
        return counts["numa_fault_fail"]
    if "numa_events" in result.raw and result.raw.get("source"):
        return sum(1 for e in result.raw["numa_events"] if e.get("event") == "numa_fault_fail")
    return None


def memory_share_end(result, horizon_s: float | None = None) -> dict:
    """{node: share} of the processes' resident pages (series.memory: numa_maps in the VM) at
    the last sample up to `horizon_s` (the end by default); {} without samples."""
    mem = (result.raw.get("series") or {}).get("memory") or {}
    rows = list(zip(mem.get("time_s", []), mem.get("node", []), mem.get("pages", [])))
    times = [float(t) for t, _, _ in rows if horizon_s is None or float(t) <= horizon_s + 1e-9]
    if not times:
        return {}
    last = max(times)
    by_node = defaultdict(int)
    for t, n, pages in rows:
        if float(t) == last:
            by_node[int(n)] += int(pages)
    total = sum(by_node.values())
    return {n: by_node[n] / total for n in sorted(by_node)} if total else {}


def metrics(result, horizon_s: float | None = None) -> dict:
    """Scan passes at `horizon_s` (the end by default) and per pass, failed migrations,
    placement and the task-move tracepoints."""
    m = {}
    seqs = scan_seq_by_pid(result)
    if seqs:
        end = horizon_s if horizon_s is not None else result.elapsed_s
        m["scan_passes"] = passes_at(seqs, end)
        total = sum(passes_at({p: v}, end) for p, v in seqs.items())
        if total:  # counts and passes over the same time: up to the horizon
            m["numa_pte_updates_per_pass"] = count_at(result, "numa_pte_updates", end) / total
            m["numa_hint_faults_per_pass"] = count_at(result, "numa_hint_faults", end) / total
    m["migrate_fail_faults"] = migrate_fail_faults(result)
    p = placement(result)
    if p:
        forked = fork_nodes(result)
        if len(forked) >= 2:
            m["placement_fork"] = placement_kind(forked)
        m["placement_initial"] = p["initial"]
        m["placement_final"] = p["final"]
        m["separated_s"] = p["separated_s"]
    else:  # one process: where its threads ended, and when the scheduler moved them across
        tl = worker_nodes(result)
        if tl and sum(len(v) for v in tl[-1][1].values()) >= 2:
            m["placement_workers_final"] = workers_per_node(tl[-1][1])
            moves = cross_node_moves(result)
            m["cross_node_moves"] = len(moves)
            m["first_cross_node_move_s"] = moves[0] if moves else None
    for n, share in memory_share_end(result, horizon_s).items():
        m[f"memory_share_node{n}_end"] = share
    by_node = migrated_by_thread_node(result)
    if len(by_node) >= 2:
        for n, v in by_node.items():
            m[f"numa_pages_migrated_by_node{n}_threads"] = v
    ev = events(result)
    for k in ("move_numa", "swap_numa", "stick_numa"):
        m[k] = ev.get(k, 0)
    return m


def fault_kinds_by_pass(result) -> list:
    """`validate --trace-faults` / `run.trace_faults`: each thread's hint faults per scan pass,
    by kind: [{pass, thread, faults, local, first, own, other, migrated}]. Pass k of a thread
    runs from the start of its process's k-th task_numa_work window (scan_windows) to the next
    (pass 0: before the first); thread "p.k" is the k-th task in tid order (0: the main thread)
    of the p-th process in tgid order. A 10 ms count belongs to the last pass begun before its
    end."""
    rows = result.raw.get("fault_kinds") or []
    tgid = {int(t["pid"]): int(t.get("tgid", t["pid"])) for t in result.raw.get("tasks") or []}
    starts = defaultdict(list)
    for w in result.raw.get("scan_windows") or []:
        starts[tgid.get(int(w["task"]))].append(float(w["t"]))
    procs = sorted(set(tgid.values()))
    rank = {tid: f"{procs.index(g)}.{sorted(t for t in tgid if tgid[t] == g).index(tid)}" for tid, g in tgid.items()}
    rows = [r for r in rows if int(r["task"]) in tgid]
    out = {}
    for r in rows:
        k = sum(1 for s in starts[tgid[int(r["task"])]] if s < float(r["t"]) + 0.01)
        e = out.setdefault((k, rank[int(r["task"])]), {"pass": k, "thread": rank[int(r["task"])], "faults": 0, "local": 0,
                                                      "first": 0, "own": 0, "other": 0, "migrated": 0})
        n = int(r["n"])
        e["faults"] += n
        e["local"] += n if r["local"] else 0
        e["migrated"] += n if r["migrated"] else 0
        if r["last"] in ("first", "own", "other"):
            e[r["last"]] += n
    return [out[k] for k in sorted(out)]


def fault_kinds_table(sim, vm) -> str:
    """Side by side per pass and thread: hint faults, and the shares that steer the scan
    period (local, faults on pages another thread touched last) and placement (migrated)."""
    a = {(r["pass"], r["thread"]): r for r in fault_kinds_by_pass(sim)}
    b = {(r["pass"], r["thread"]): r for r in fault_kinds_by_pass(vm)}
    pct = lambda r, k: f"{100 * r[k] / r['faults']:.0f}%" if r and r["faults"] else "-"  # noqa: E731
    n = lambda r: str(r["faults"]) if r else "-"  # noqa: E731
    lines = [f"{'pass':>4} {'thread':>6}  {'faults sim/vm':>15}  {'local sim/vm':>12}  {'other sim/vm':>12}  "
             f"{'migrated sim/vm':>15}"]
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        lines.append(f"{key[0]:>4} {key[1]:>6}  {n(x) + '/' + n(y):>15}  {pct(x, 'local') + '/' + pct(y, 'local'):>12}  "
                     f"{pct(x, 'other') + '/' + pct(y, 'other'):>12}  {pct(x, 'migrated') + '/' + pct(y, 'migrated'):>15}")
    sw = lambda r: ", ".join(f"{w['t']:.2f}" for w in r.raw.get("scan_windows") or [])  # noqa: E731
    return "\n".join(lines + [f"scan windows (s): sim {sw(sim)}", f"                  vm  {sw(vm)}"])

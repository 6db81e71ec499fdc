"""Event traces (docs/traces.md): a result's traced events in the Trace Event JSON format
that ui.perfetto.dev and chrome://tracing open, and as one long pandas table.

The input is a result dict (the engine's result JSON, or a VM's ``vm.json`` from ``numasim
validate --trace-faults``) or a ``numasim.Result``. It holds trace data when it has the key
``trace`` (``run.trace = true``) or ``scan_windows`` / ``fault_kinds`` (``run.trace_faults``).
Every list is optional; fields this module does not know are carried along in ``args``, and an
event name it does not know is shown as is.

Tracks: one process per simulated process (pid = tgid), one thread per task (tid = pid), the
process "CPUs" (pid CPUS_PID, one thread per CPU) where events say on which CPU they ran, and
the process "kernel" (pid KERNEL_PID) for the system-wide counters per bin.
"""

from __future__ import annotations

import gzip
import json
import os
import warnings
from pathlib import Path

from numasim.scenario import UsageError

FAULT_BIN_MS = 10  # fault_kinds are counted per 10 ms (run.trace_faults, docs/scenario.md)
CPUS_PID = 4194304  # PID_MAX_LIMIT (2^22): no task's pid reaches it
KERNEL_PID = CPUS_PID + 1

SCHED_NAMES = {  # numa_events' `event` -> the kernel's tracepoint
    "move_numa": "sched_move_numa",
    "swap_numa": "sched_swap_numa",
    "stick_numa": "sched_stick_numa",
    "migrate_task": "sched_migrate_task",
    "wakeup_new": "sched_wakeup_new",
}
# the sampled /proc/vmstat counters (series.vmstat of a simulated and a real-kernel result
# alike) shown as the change from one sample to the next, so the two open side by side
VMSTAT_COUNTERS = ("numa_pte_updates", "numa_hint_faults", "numa_hint_faults_local", "numa_pages_migrated",
                   "pgpromote_success", "pgdemote_kswapd", "pgdemote_direct", "nr_tlb_remote_flush_received")
CPU_KEYS = ("cpu", "dst_cpu", "dest_cpu", "target_cpu")  # the CPU an event lands on, first found

TABLE_COLUMNS = ["time_s", "kind", "pid", "tgid", "cpu", "src_nid", "dst_nid", "value", "args"]
INT_COLUMNS = ["pid", "tgid", "cpu", "src_nid", "dst_nid", "value"]

NO_TRACE_HINT = ("run with --trace or run.trace = true (hint faults and scan windows alone: "
                 "run.trace_faults = true; a real kernel: numasim validate --trace-faults)")


# ---------------------------------------------------------------- reading the result


def _raw(result) -> dict:
    raw = getattr(result, "raw", result)
    if not isinstance(raw, dict):
        raise UsageError(f"a result is a dict (its JSON) or a numasim.Result, not {type(raw).__name__}")
    return raw


def has_trace_data(result) -> bool:
    """The result has `trace` (run.trace) or `scan_windows` / `fault_kinds` (run.trace_faults)."""
    raw = _raw(result)
    return _dict(raw, "trace") is not None or any(isinstance(raw.get(k), list) for k in ("scan_windows", "fault_kinds"))


def _require_trace(raw: dict, what: str) -> None:
    if not has_trace_data(raw):
        raise UsageError(f"{what} has no trace data: {NO_TRACE_HINT}")


def _dict(d: dict, key: str):
    """d[key] if it is a dict, else None."""
    v = d.get(key)
    return v if isinstance(v, dict) else None


def _dicts(d: dict, key: str) -> list:
    """d[key] as a list of dicts (missing or malformed: empty)."""
    v = d.get(key)
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _rows(d: dict, key: str) -> list:
    """The entries of d[key] that have a time `t`."""
    return [x for x in _dicts(d, key) if isinstance(x.get("t"), (int, float))]


class _Trace:
    """A result's traced lists, normalised: each optional, `trace.*` before the top level."""

    def __init__(self, raw: dict):
        tr = _dict(raw, "trace") or {}
        self.bin_ms = tr.get("bin_ms", FAULT_BIN_MS)
        self.windows = _rows(tr if "scan_windows" in tr else raw, "scan_windows")
        self.sched = _rows(raw, "numa_events")
        self.groups = _rows(tr, "groups")
        self.preferred = _rows(tr, "preferred")
        self.migrate = _rows(tr, "migrate")
        self.tlb = _rows(tr, "tlb")
        self.faults = _rows(raw, "fault_kinds")
        self.vmstat = _vmstat_steps(raw)
        self.dropped = dropped(raw)
        self._tgid = {t.get("pid"): t.get("tgid") for t in _dicts(raw, "tasks") if t.get("tgid") is not None}
        self.comm = {p.get("pid"): p.get("comm") for p in _dicts(raw, "processes") if p.get("comm")}

    def tgid(self, pid, given=None):
        """The task's tgid: the event's own, else the result's `tasks`, else its pid."""
        if given is not None:
            return given
        return self._tgid.get(pid, pid)

    def track(self, pid, given=None) -> tuple:
        """(pid, tid) of the task's track; an event naming no task goes to "kernel"."""
        if pid is None:
            return KERNEL_PID, 0
        return self.tgid(pid, given), pid


def _vmstat_steps(raw: dict) -> list:
    """(counter, interval start s, change over the interval to the next sample) of
    VMSTAT_COUNTERS in series.vmstat, for the intervals where it changed or stopped changing."""
    vm = _dict(_dict(raw, "series") or {}, "vmstat") or {}
    times = vm.get("time_s") or []
    out = []
    for name in VMSTAT_COUNTERS:
        vals = vm.get(name)
        if not isinstance(vals, list) or len(vals) != len(times):
            continue
        prev_step = 0
        for i in range(1, len(times)):
            step = vals[i] - vals[i - 1]
            if step or prev_step:
                out.append((name, float(times[i - 1]), step))
            prev_step = step
    return out


def dropped(result) -> dict:
    """{list name: entries the engine left out} of a result's traces (only those > 0)."""
    raw = _raw(result)
    tr = _dict(raw, "trace") or {}
    out = {k: n for k, n in (_dict(tr, "dropped") or {}).items() if isinstance(n, int) and n > 0}
    if isinstance(raw.get("numa_events_dropped"), int) and raw["numa_events_dropped"] > 0:
        out["numa_events"] = raw["numa_events_dropped"]
    return dict(sorted(out.items()))


def _subject(e: dict):
    """The task an event is about: `pid` (a VM's events also name the current task, `task`)."""
    return e.get("pid", e.get("task"))


def _cpu(e: dict):
    for k in CPU_KEYS:
        if isinstance(e.get(k), int) and e[k] >= 0:
            return e[k]
    return None


def _sched_name(e: dict) -> str:
    ev = str(e.get("event"))
    return SCHED_NAMES.get(ev, ev)


def _group_name(e: dict) -> str:
    return f"numa_group_{e.get('event')}"


def _us(t) -> float:
    """Seconds -> microseconds, to the nanosecond (a stable text for equal inputs)."""
    return round(float(t) * 1e6, 3)


def _dur_us(w: dict) -> float:
    """A window's length; 0 when it has no end (or an end before its start)."""
    end = w.get("end")
    if not isinstance(end, (int, float)) or end < w["t"]:
        return 0.0
    return round(_us(end) - _us(w["t"]), 3)


def _fault_key(f: dict) -> str:
    """A fault_kinds row's series: local/remote, then migrated and failed if so."""
    key = "local" if f.get("local") else "remote"
    return key + (" migrated" if f.get("migrated") else "") + (" failed" if f.get("failed") else "")


# ---------------------------------------------------------------- Trace Event JSON


def _instant(name: str, pid, tid, t, args: dict, cat: str = "numa") -> dict:
    return {"name": name, "cat": cat, "ph": "i", "s": "t", "ts": _us(t), "pid": pid, "tid": tid, "args": args}


def _meta(name: str, pid, tid, value: str) -> dict:
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": {"name": value}}


def _without(e: dict, *keys) -> dict:
    return {k: v for k, v in e.items() if k not in keys}


def _window_events(tr: _Trace) -> list:
    """Each task_numa_work window on its task's track, and on its CPU's where known."""
    out = []
    for w in tr.windows:
        pid, tid = tr.track(w.get("task"), w.get("tgid"))
        x = {"name": "task_numa_work", "cat": "numa", "ph": "X", "ts": _us(w["t"]), "dur": _dur_us(w),
             "pid": pid, "tid": tid, "args": dict(w)}
        out.append(x)
        if _cpu(w) is not None:
            out.append({**x, "name": f"task_numa_work tid {tid}", "cat": "cpu", "pid": CPUS_PID, "tid": _cpu(w)})
    return out


def _instant_events(tr: _Trace) -> list:
    """Scheduler decisions, numa_group changes and preferred-node changes as instants."""
    out = []
    for e in tr.sched:
        (pid, tid), name, args = tr.track(_subject(e), e.get("tgid")), _sched_name(e), _without(e, "t", "event")
        out.append(_instant(name, pid, tid, e["t"], args))
        if _cpu(e) is not None:
            out.append(_instant(f"{name} tid {tid}", CPUS_PID, _cpu(e), e["t"], args, cat="cpu"))
    for e in tr.groups:
        pid, tid = tr.track(e.get("task"), e.get("tgid"))
        out.append(_instant(_group_name(e), pid, tid, e["t"], _without(e, "t", "event")))
    for e in tr.preferred:
        pid, tid = tr.track(e.get("task"), e.get("tgid"))
        out.append(_instant("preferred_nid", pid, tid, e["t"], _without(e, "t")))
    return out


class _Counters:
    """Counts per bin, by (track pid, counter name) and series key."""

    def __init__(self):
        self.bins = {}  # (pid, name, bin_us) -> {ts: {key: n}}

    def add(self, pid, name: str, bin_ms, t, key: str, n) -> None:
        per_ts = self.bins.setdefault((pid, name, bin_ms * 1000.0), {})
        series = per_ts.setdefault(_us(t), {})
        series[key] = series.get(key, 0) + (n or 0)

    def events(self) -> list:
        """Every series of a counter at each of its bins, and 0 where the next bin is empty
        (a counter holds its value until the next sample)."""
        out = []
        for (pid, name, bin_us), per_ts in self.bins.items():
            keys = sorted({k for series in per_ts.values() for k in series})
            times = sorted(per_ts)
            for i, ts in enumerate(times):
                out.append(_counter(name, pid, ts, {k: per_ts[ts].get(k, 0) for k in keys}))
                end = round(ts + bin_us, 3)
                if i + 1 == len(times) or times[i + 1] > end + 0.5:
                    out.append(_counter(name, pid, end, dict.fromkeys(keys, 0)))
        return out


def _counter(name: str, pid, ts: float, args: dict) -> dict:
    return {"name": name, "cat": "numa", "ph": "C", "ts": ts, "pid": pid, "tid": pid, "args": args}


def _counter_events(tr: _Trace) -> list:
    """Hint faults per task (on its process), migrations and TLB flushes (on "kernel")."""
    c = _Counters()
    fb = FAULT_BIN_MS
    for f in tr.faults:
        pid, tid = tr.track(f.get("task"), f.get("tgid"))
        c.add(pid, f"hint faults per {fb} ms, tid {tid}", fb, f["t"], _fault_key(f), f.get("n"))
        c.add(pid, f"hint faults per {fb} ms by last cpupid, tid {tid}", fb, f["t"], str(f.get("last")), f.get("n"))
    b = tr.bin_ms
    for m in tr.migrate:
        name = f"mm_migrate_pages per {b} ms ({m.get('reason')}, node {m.get('src')}->{m.get('dst')})"
        for key, field in (("pages succeeded", "succeeded"), ("pages failed", "failed"), ("calls", "calls")):
            c.add(KERNEL_PID, name, b, m["t"], key, m.get(field))
    for x in tr.tlb:
        name = f"tlb_flush per {b} ms ({x.get('reason')})"
        c.add(KERNEL_PID, name, b, x["t"], "rounds", x.get("rounds"))
        c.add(KERNEL_PID, name, b, x["t"], "IPIs", x.get("ipis"))
    # sampled counters: each sample's change, held until the next sample
    steps = [_counter(f"vmstat {name} per sample", KERNEL_PID, _us(t), {name: step}) for name, t, step in tr.vmstat]
    return c.events() + steps


def _track_names(tr: _Trace, events: list) -> list:
    """process_name / thread_name metadata of every track the events use."""
    tracks = sorted({(e["pid"], e["tid"]) for e in events})
    out = []
    for pid in sorted({p for p, _ in tracks}):
        if pid == CPUS_PID:
            name = "CPUs"
        elif pid == KERNEL_PID:
            name = "kernel (system-wide, per bin)"
        else:
            name = f"{tr.comm[pid]} (tgid {pid})" if pid in tr.comm else f"tgid {pid}"
        out.append(_meta("process_name", pid, pid, name))
    for pid, tid in tracks:
        if pid == CPUS_PID:
            out.append(_meta("thread_name", pid, tid, f"CPU {tid}"))
        elif pid != KERNEL_PID:
            out.append(_meta("thread_name", pid, tid, f"tid {tid}"))
    return out


def _metadata(raw: dict, tr: _Trace) -> dict:
    src = _dict(raw, "source") or {}
    kernel = src.get("kernel") or (_dict(_dict(raw, "scenario") or {}, "kernel") or {}).get("version")
    meta = {
        "source": f"real kernel ({src.get('kind')})" if src else "numasim simulator",
        "kernel": kernel,
        "seed": raw.get("seed"),
        "numasim_version": raw.get("numasim_version"),
        "bin_ms": tr.bin_ms,
        "fault_bin_ms": FAULT_BIN_MS,
        "cpus_pid": CPUS_PID,
        "kernel_pid": KERNEL_PID,
        "dropped": tr.dropped,
    }
    return {k: v for k, v in meta.items() if v is not None}


def to_trace_events(result, *, what: str = "the result") -> dict:
    """The result's traces as a Trace Event JSON document (ts and dur in microseconds),
    events sorted by ts, metadata events first. The same input gives the same document."""
    raw = _raw(result)
    _require_trace(raw, what)
    tr = _Trace(raw)
    events = _window_events(tr) + _instant_events(tr) + _counter_events(tr)
    events.sort(key=lambda e: e["ts"])  # stable: equal times keep the order built above
    return {"traceEvents": _track_names(tr, events) + events, "displayTimeUnit": "ms",
            "metadata": _metadata(raw, tr)}


def dumps(doc: dict) -> str:
    """The document as JSON text, one event a line."""
    lines = ",\n".join(json.dumps(e, separators=(",", ":"), allow_nan=False) for e in doc["traceEvents"])
    rest = json.dumps({k: v for k, v in doc.items() if k != "traceEvents"}, separators=(",", ":"), allow_nan=False)
    return '{"traceEvents":[\n' + lines + "\n]," + rest[1:] + "\n"


# ---------------------------------------------------------------- the long table


def _row(t, kind: str, pid=None, tgid=None, cpu=None, src=None, dst=None, value=1, args=None) -> dict:
    return {"time_s": float(t), "kind": kind, "pid": pid, "tgid": tgid, "cpu": cpu, "src_nid": src,
            "dst_nid": dst, "value": value, "args": json.dumps(args or {}, sort_keys=True, separators=(",", ":"))}


def _table_rows(tr: _Trace) -> list:
    rows = []
    for w in tr.windows:
        pid = w.get("task")
        rows.append(_row(w["t"], "task_numa_work", pid, tr.tgid(pid, w.get("tgid")), _cpu(w),
                         args=_without(w, "t", "task", "tgid", "cpu")))
    for e in tr.sched:
        pid = _subject(e)
        rows.append(_row(e["t"], _sched_name(e), pid, tr.tgid(pid, e.get("tgid")), _cpu(e), e.get("src_nid"),
                         e.get("dst_nid"), args=_without(e, "t", "event", "pid", "tgid", "src_nid", "dst_nid")))
    for e in tr.groups:
        pid = e.get("task")
        rows.append(_row(e["t"], _group_name(e), pid, tr.tgid(pid, e.get("tgid")),
                         args=_without(e, "t", "event", "task", "tgid")))
    for e in tr.preferred:
        pid = e.get("task")
        rows.append(_row(e["t"], "preferred_nid", pid, tr.tgid(pid, e.get("tgid")), src=e.get("from"),
                         dst=e.get("to"), args=_without(e, "t", "task", "tgid", "from", "to")))
    for f in tr.faults:
        pid = f.get("task")
        rows.append(_row(f["t"], "hint_faults", pid, tr.tgid(pid, f.get("tgid")), value=f.get("n"),
                         args=_without(f, "t", "task", "tgid", "n")))
    for m in tr.migrate:
        rows.append(_row(m["t"], "mm_migrate_pages", src=m.get("src"), dst=m.get("dst"), value=m.get("succeeded"),
                         args=_without(m, "t", "src", "dst", "succeeded")))
    for x in tr.tlb:
        rows.append(_row(x["t"], "tlb_flush", value=x.get("ipis"), args=_without(x, "t", "ipis")))
    for name, t, step in tr.vmstat:
        rows.append(_row(t, "vmstat", value=step, args={"counter": name}))
    return rows


def to_table(result, *, what: str = "the result"):
    """One row per traced event, window or bin, sorted by time_s (docs/traces.md):
    time_s, kind, pid, tgid, cpu, src_nid, dst_nid, value, args. The ids and value are
    nullable integers; `value` is what the row counts (1 for an event or a window, the
    faults of a fault_kinds bin, the pages migrated of a migrate bin, the IPIs of a tlb bin);
    `args` is the rest of the row's fields as a JSON object."""
    import pandas as pd

    raw = _raw(result)
    _require_trace(raw, what)
    df = pd.DataFrame(_table_rows(_Trace(raw)), columns=TABLE_COLUMNS)
    df = df.astype({"time_s": "float64", "kind": "str", "args": "str", **dict.fromkeys(INT_COLUMNS, "Int64")})
    return df.sort_values("time_s", kind="stable", ignore_index=True)


# ---------------------------------------------------------------- files


def trace_paths(path, option: str = "path") -> tuple:
    """(the trace file, the Parquet table beside it): NAME.json or NAME.json.gz -> NAME.parquet."""
    p = Path(path)
    for ext in (".json.gz", ".json"):
        if p.name.endswith(ext) and len(p.name) > len(ext):
            return p, p.with_name(p.name[: -len(ext)] + ".parquet")
    raise UsageError(f"{option} {path}: give a file name ending in .json or .json.gz (Trace Event JSON, "
                     "gzipped for .gz)")


def _write_bytes(path: Path, data: bytes, gz: bool) -> None:
    """`data` to `path`, gzipped if `gz` (with no name or time in the gzip header)."""
    with open(path, "wb") as f:
        if gz:
            with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as z:
                z.write(data)
        else:
            f.write(data)


def write_trace(result, path, *, option: str = "path", what: str = "the result") -> tuple:
    """Write the Trace Event JSON to ``path`` (.json, or .json.gz gzipped) and the table to
    the same name with .parquet; return both paths (the table's None without pyarrow).
    UsageError for a result without trace data or a path that cannot be written."""
    from numasim.outpaths import check_output
    from numasim.storage import have_parquet

    json_path, parquet_path = trace_paths(path, option)
    check_output(json_path, "file", option)
    text = dumps(to_trace_events(result, what=what))  # before any file is written
    table = to_table(result, what=what)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = [json_path.with_name(f".{p.name}.tmp-{os.getpid()}") for p in (json_path, parquet_path)]
    try:
        _write_bytes(tmp[0], text.encode("utf-8"), gz=json_path.name.endswith(".gz"))
        if have_parquet():
            table.to_parquet(tmp[1], index=False)
        else:
            warnings.warn(f"pyarrow is not installed: wrote {json_path} without {parquet_path.name}", stacklevel=2)
            parquet_path = None
        if parquet_path is not None:
            os.replace(tmp[1], parquet_path)
        os.replace(tmp[0], json_path)  # the trace last: it is there only if the table is too
    finally:
        for t in tmp:
            t.unlink(missing_ok=True)
    return json_path, parquet_path


def load_result_json(path) -> dict:
    """A saved result (a simulator's, or a VM's vm.json) as a dict; UsageError if it is not one."""
    from numasim.textfile import read_text

    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{p}: is a directory; give one result JSON (e.g. {p}/iter-01.json or {p}/vm.json)")
    try:
        raw = json.loads(read_text(p, "result JSON", max_bytes=2 << 30))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{p}: not a result JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{p}: not a result JSON (a {type(raw).__name__}, not an object)")
    return raw

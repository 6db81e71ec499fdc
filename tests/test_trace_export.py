"""Event traces (issue 31 item 3, docs/traces.md): a result's traces as Trace Event JSON for
Perfetto and as a long Parquet table. Checked on a hand-written result of the engine's `trace`
shape and on a trimmed VM result (tests/data), against the Trace Event format's rules: Perfetto's
trace_processor cannot be downloaded here to load the files."""

from __future__ import annotations

import copy
import gzip
import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

import numasim
from conftest import SMALL_NUMA02, numasim_cli
from numasim import cli
from numasim.scenario import UsageError
from numasim.trace_export import (
    CPUS_PID, KERNEL_PID, TABLE_COLUMNS, dumps, to_table, to_trace_events, write_trace,
)

VM_DATA = Path(__file__).parent / "data" / "trace-vm-two-processes-4k-6.1.json"


def sim_result() -> dict:
    """A simulator result with `run.trace` and `run.trace_faults`, as the engine writes them."""
    return {
        "seed": 3, "numasim_version": "0.1.0", "scenario": {"kernel": {"version": "6.12"}},
        "processes": [{"pid": 1000, "comm": "numa01"}],
        "tasks": [{"pid": 1000, "tgid": 1000}, {"pid": 1002, "tgid": 1000}, {"pid": 1003, "tgid": 1000}],
        "numa_events": [
            {"t": 0.0, "event": "wakeup_new", "pid": 1002, "tgid": 1000, "src_nid": 0, "dst_nid": 0, "dst_pid": 0},
            {"t": 1.5, "event": "move_numa", "pid": 1002, "tgid": 1000, "src_nid": 0, "dst_nid": 1, "dst_pid": 0},
            {"t": 2.0, "event": "swap_numa", "pid": 1003, "tgid": 1000, "src_nid": 1, "dst_nid": 0, "dst_pid": 1002},
            {"t": 2.5, "event": "stick_numa", "pid": 1003, "tgid": 1000, "src_nid": 0, "dst_nid": 1, "dst_pid": -1},
            {"t": 2.6, "event": "migrate_task", "pid": 1002, "tgid": 1000, "src_nid": 1, "dst_nid": 0,
             "dst_pid": 0, "dst_cpu": 2},
            {"t": 2.7, "event": "a_future_event", "pid": 1003, "tgid": 1000, "src_nid": 0, "dst_nid": 0, "dst_pid": 0},
        ],
        # run.trace_faults' windows: `trace.scan_windows` replaces them when both are there
        "scan_windows": [{"t": 1.0, "end": 1.002, "task": 1002, "seq": 0, "period_ms": 1000}],
        "fault_kinds": [
            {"t": 1.01, "task": 1002, "local": 0, "last": "first", "migrated": 1, "failed": 0, "n": 40},
            {"t": 1.01, "task": 1002, "local": 1, "last": "first", "migrated": 0, "failed": 0, "n": 7},
            {"t": 1.02, "task": 1002, "local": 0, "last": "other", "migrated": 0, "failed": 1, "n": 3},
            {"t": 1.05, "task": 1003, "local": 1, "last": "own", "migrated": 0, "failed": 0, "n": 11},
            {"t": 1.06, "task": 1003, "local": 1, "last": "own", "migrated": 0, "failed": 0, "n": 2},
        ],
        "trace": {
            "bin_ms": 10,
            "scan_windows": [
                {"t": 1.0, "end": 1.002, "task": 1002, "tgid": 1000, "cpu": 3, "seq": 0, "period_ms": 1000,
                 "pte_updates": 512, "huge_pmd_updates": 0, "vmas": 2, "skipped": {"unmigratable": 1}},
                {"t": 2.0, "end": 2.0, "task": 1003, "tgid": 1000, "cpu": 1, "seq": 1, "period_ms": 1000,
                 "pte_updates": 0, "huge_pmd_updates": 0, "vmas": 0, "skipped": {}},
                {"t": 3.0, "end": 3.0105, "task": 1002, "tgid": 1000, "cpu": 3, "seq": 1, "period_ms": 1100,
                 "pte_updates": 64, "huge_pmd_updates": 1, "vmas": 1, "skipped": {}, "a_new_field": 5},
            ],
            "groups": [
                {"t": 1.2, "event": "create", "task": 1002, "tgid": 1000, "gid": 1002, "nr_tasks": 1},
                {"t": 1.3, "event": "join", "task": 1003, "tgid": 1000, "gid": 1002, "nr_tasks": 2},
            ],
            "preferred": [{"t": 1.1, "task": 1002, "tgid": 1000, "from": -1, "to": 1}],
            "migrate": [
                {"t": 1.01, "reason": "numa_misplaced", "src": 0, "dst": 1, "succeeded": 40, "failed": 1, "calls": 40},
                {"t": 1.03, "reason": "numa_misplaced", "src": 0, "dst": 1, "succeeded": 9, "failed": 0, "calls": 9},
                {"t": 1.03, "reason": "syscall", "src": 1, "dst": 0, "succeeded": 512, "failed": 0, "calls": 1},
            ],
            "tlb": [{"t": 1.0, "reason": "a_flush_reason", "rounds": 3, "ipis": 21},
                    {"t": 1.01, "reason": "a_flush_reason", "rounds": 1, "ipis": 7}],
            "dropped": {"migrate": 0, "tlb": 4},
            "a_future_list": [{"t": 1.0, "x": 1}],
        },
    }


def vm_result() -> dict:
    return json.loads(VM_DATA.read_text(encoding="utf-8"))


def events(raw: dict) -> list:
    return to_trace_events(raw)["traceEvents"]


# ---------------------------------------------------------------- the format


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@pytest.mark.parametrize("make", [sim_result, vm_result], ids=["sim", "vm"])
def test_every_event_follows_the_trace_event_format(make):
    doc = to_trace_events(make())
    assert doc["displayTimeUnit"] == "ms" and isinstance(doc["metadata"], dict)
    evs = json.loads(dumps(doc))["traceEvents"]  # the text is strict JSON
    assert evs and evs == doc["traceEvents"]
    for e in evs:
        assert {"ph", "ts", "pid", "tid", "name"} <= set(e), e
        assert isinstance(e["name"], str) and e["name"] and _is_num(e["ts"]) and e["ts"] >= 0, e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        assert e["ph"] in {"X", "i", "C", "M"}, e
        if e["ph"] == "X":
            assert _is_num(e["dur"]) and e["dur"] >= 0, e
        if e["ph"] == "i":
            assert e["s"] == "t", e
        if e["ph"] == "C":  # every series a number
            assert e["args"] and all(_is_num(v) for v in e["args"].values()), e
        if e["ph"] == "M":
            assert e["name"] in {"process_name", "thread_name"} and isinstance(e["args"]["name"], str), e
    assert [e["ts"] for e in evs] == sorted(e["ts"] for e in evs), "sorted by ts"
    # every track the events use is named
    named_procs = {e["pid"] for e in evs if e["name"] == "process_name"}
    named_threads = {(e["pid"], e["tid"]) for e in evs if e["name"] == "thread_name"}
    for e in evs:
        assert e["pid"] in named_procs, e
        if e["ph"] in "Xi":
            assert (e["pid"], e["tid"]) in named_threads, e


def test_tracks_per_process_task_and_cpu():
    evs = events(sim_result())
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs if e["name"] == "thread_name"}
    procs = {e["pid"]: e["args"]["name"] for e in evs if e["name"] == "process_name"}
    assert procs[1000] == "numa01 (tgid 1000)" and procs[CPUS_PID] == "CPUs" and KERNEL_PID in procs
    assert names[(1000, 1002)] == "tid 1002" and names[(1000, 1003)] == "tid 1003"
    assert names[(CPUS_PID, 3)] == "CPU 3" and names[(CPUS_PID, 1)] == "CPU 1"
    assert names[(CPUS_PID, 2)] == "CPU 2", "sched_migrate_task's dst_cpu"


def test_a_result_without_cpus_has_no_cpu_process():
    raw = sim_result()
    del raw["trace"]
    raw["numa_events"][4].pop("dst_cpu")
    assert all(e["pid"] != CPUS_PID for e in events(raw))


# ---------------------------------------------------------------- what the events hold


def test_each_scan_window_is_one_task_numa_work_event_on_its_task():
    raw = sim_result()
    windows = raw["trace"]["scan_windows"]
    evs = events(raw)
    work = [e for e in evs if e["name"] == "task_numa_work"]
    assert len(work) == len(windows) and all(e["ph"] == "X" for e in work)
    for e, w in zip(work, windows):
        assert (e["pid"], e["tid"]) == (w["tgid"], w["task"])
        assert e["ts"] == pytest.approx(w["t"] * 1e6) and e["dur"] == pytest.approx((w["end"] - w["t"]) * 1e6)
        assert e["args"] == w, "args: the window's fields, unknown ones too"
    on_cpus = [e for e in evs if e["pid"] == CPUS_PID and e["ph"] == "X"]
    assert [(e["tid"], e["name"]) for e in on_cpus] == [(w["cpu"], f"task_numa_work tid {w['task']}") for w in windows]


def test_run_trace_faults_windows_alone_are_used_without_run_trace():
    raw = vm_result()
    work = [e for e in events(raw) if e["name"] == "task_numa_work"]
    assert len(work) == len(raw["scan_windows"]) > 0
    tgid = {t["pid"]: t["tgid"] for t in raw["tasks"]}
    assert all(e["pid"] == tgid[e["tid"]] for e in work), "the VM's tasks give each thread its process"


def test_sched_group_and_preferred_instants():
    evs = events(sim_result())
    inst = [(e["name"], e["tid"]) for e in evs if e["ph"] == "i" and e["pid"] != CPUS_PID]
    assert inst == [("sched_wakeup_new", 1002), ("preferred_nid", 1002), ("numa_group_create", 1002),
                    ("numa_group_join", 1003), ("sched_move_numa", 1002), ("sched_swap_numa", 1003),
                    ("sched_stick_numa", 1003), ("sched_migrate_task", 1002), ("a_future_event", 1003)]
    swap = next(e for e in evs if e["name"] == "sched_swap_numa")
    assert swap["args"] == {"pid": 1003, "tgid": 1000, "src_nid": 1, "dst_nid": 0, "dst_pid": 1002}
    pref = next(e for e in evs if e["name"] == "preferred_nid")
    assert pref["args"]["from"] == -1 and pref["args"]["to"] == 1


def _counters(evs: list, name: str) -> list:
    return [e for e in evs if e["ph"] == "C" and e["name"] == name]


@pytest.mark.parametrize("make", [sim_result, vm_result], ids=["sim", "vm"])
def test_fault_counters_add_up_to_fault_kinds_per_task(make):
    raw = make()
    evs = events(raw)
    total = defaultdict(int)
    for f in raw["fault_kinds"]:
        total[f["task"]] += f["n"]
    assert total
    for task, n in total.items():
        for name in (f"hint faults per 10 ms, tid {task}", f"hint faults per 10 ms by last cpupid, tid {task}"):
            samples = _counters(evs, name)
            assert sum(sum(e["args"].values()) for e in samples) == n, name
            assert len({tuple(sorted(e["args"])) for e in samples}) == 1, "every series at every sample"
            assert sum(samples[-1]["args"].values()) == 0, "the counter falls back to 0 after its last bin"


def test_a_bin_is_followed_by_zero_only_where_the_next_bin_is_empty():
    samples = _counters(events(sim_result()), "hint faults per 10 ms, tid 1002")
    got = [(round(e["ts"]), e["args"]) for e in samples]
    zero = {"local": 0, "remote failed": 0, "remote migrated": 0}
    assert got == [(1010000, {"local": 7, "remote failed": 0, "remote migrated": 40}),
                   (1020000, {"local": 0, "remote failed": 3, "remote migrated": 0}),
                   (1030000, zero)]


def test_migrate_and_tlb_bins_are_kernel_counters():
    raw = sim_result()
    evs = events(raw)
    mig = _counters(evs, "mm_migrate_pages per 10 ms (numa_misplaced, node 0->1)")
    assert {e["pid"] for e in mig} == {KERNEL_PID}
    assert sum(e["args"]["pages succeeded"] for e in mig) == 49
    assert sum(e["args"]["pages failed"] for e in mig) == 1 and sum(e["args"]["calls"] for e in mig) == 49
    assert [e["ts"] for e in mig] == [1010000.0, 1020000.0, 1030000.0, 1040000.0], "0 in the empty bin between"
    assert sum(e["args"]["pages succeeded"] for e in _counters(evs, "mm_migrate_pages per 10 ms (syscall, node 1->0)")) == 512
    tlb = _counters(evs, "tlb_flush per 10 ms (a_flush_reason)")
    assert sum(e["args"]["IPIs"] for e in tlb) == 28 and sum(e["args"]["rounds"] for e in tlb) == 4
    assert to_trace_events(raw)["metadata"]["dropped"] == {"tlb": 4}


def test_the_export_is_deterministic(tmp_path):
    raw = sim_result()
    assert dumps(to_trace_events(raw)) == dumps(to_trace_events(copy.deepcopy(raw)))
    for name in ("a.json", "a.json.gz"):
        first = write_trace(raw, tmp_path / "1" / name)[0].read_bytes()
        assert write_trace(raw, tmp_path / "2" / name)[0].read_bytes() == first, name
    text = gzip.decompress((tmp_path / "1" / "a.json.gz").read_bytes())
    assert text == (tmp_path / "1" / "a.json").read_bytes()
    assert raw == sim_result(), "the input is left as it was"


# ---------------------------------------------------------------- the table


@pytest.mark.parametrize("make", [sim_result, vm_result], ids=["sim", "vm"])
def test_the_parquet_table_round_trips_with_the_documented_columns(make, tmp_path):
    raw = make()
    trace_file, table_file = write_trace(raw, tmp_path / "t.json")
    assert (trace_file, table_file) == (tmp_path / "t.json", tmp_path / "t.parquet")
    df = pd.read_parquet(table_file)
    assert list(df.columns) == TABLE_COLUMNS
    pd.testing.assert_frame_equal(df, to_table(raw))
    assert df["time_s"].is_monotonic_increasing
    for col in ("pid", "tgid", "cpu", "src_nid", "dst_nid", "value"):
        assert str(df[col].dtype) == "Int64", col
    assert all(isinstance(json.loads(a), dict) for a in df["args"])
    counts = df.groupby("kind")["value"].sum()
    assert counts["hint_faults"] == sum(f["n"] for f in raw["fault_kinds"])
    windows = raw["trace"]["scan_windows"] if "trace" in raw else raw["scan_windows"]
    assert counts["task_numa_work"] == len(windows)


def test_table_rows_of_each_kind():
    df = to_table(sim_result())
    row = df[df["kind"] == "mm_migrate_pages"].iloc[2]
    assert (row["src_nid"], row["dst_nid"], row["value"]) == (1, 0, 512)
    assert json.loads(row["args"]) == {"reason": "syscall", "failed": 0, "calls": 1}
    win = df[df["kind"] == "task_numa_work"].iloc[0]
    assert (win["pid"], win["tgid"], win["cpu"], win["value"]) == (1002, 1000, 3, 1)
    assert json.loads(win["args"])["skipped"] == {"unmigratable": 1}
    mt = df[df["kind"] == "sched_migrate_task"].iloc[0]
    assert (mt["cpu"], mt["src_nid"], mt["dst_nid"]) == (2, 1, 0)
    assert pd.isna(df[df["kind"] == "tlb_flush"]["pid"]).all()


# ---------------------------------------------------------------- errors


def test_a_result_without_trace_data_is_a_clear_error(tmp_path):
    raw = {"numa_events": sim_result()["numa_events"], "counters": {}}
    for f in (to_trace_events, to_table):
        with pytest.raises(UsageError, match="run with --trace or run.trace = true"):
            f(raw)
    with pytest.raises(UsageError, match="no trace data"):
        write_trace(raw, tmp_path / "t.json")
    assert list(tmp_path.iterdir()) == [], "nothing written"


def test_bad_output_paths_are_clear_errors(tmp_path):
    with pytest.raises(UsageError, match="ending in .json or .json.gz"):
        write_trace(sim_result(), tmp_path / "t.parquet")
    with pytest.raises(UsageError, match="cannot write in /proc"):
        write_trace(sim_result(), "/proc/t.json")
    (tmp_path / "d.json").mkdir()
    with pytest.raises(UsageError, match="is a directory"):
        write_trace(sim_result(), tmp_path / "d.json")


# ---------------------------------------------------------------- command line


def test_numasim_trace_on_a_vm_result(tmp_path):
    out = tmp_path / "vm-trace.json.gz"
    p = numasim_cli("trace", VM_DATA, "--out", out)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [f"trace: {out} (open it in ui.perfetto.dev or chrome://tracing)",
                                     f"table: {tmp_path / 'vm-trace.parquet'} (pandas.read_parquet)"]
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert doc == json.loads(dumps(to_trace_events(vm_result())))
    assert doc["metadata"]["source"] == "real kernel (qemu)"


def test_numasim_trace_errors_are_one_line(tmp_path, capsys):
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"numa_events": []}), encoding="utf-8")
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    cases = [([str(plain)], "has no trace data: run with --trace"),
             ([str(tmp_path / "bad.json")], "not a result JSON"),
             ([str(tmp_path)], "is a directory; give one result JSON"),
             ([str(VM_DATA), "--out", str(tmp_path / "t.txt")], "ending in .json or .json.gz")]
    for argv, msg in cases:
        assert cli.main(["trace", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and msg in err and err.count("\n") == 1, err


def test_numasim_trace_default_name_and_dropped_warning(tmp_path, capsys):
    result = tmp_path / "r.json"
    result.write_text(json.dumps(sim_result()), encoding="utf-8")
    assert cli.main(["trace", str(result)]) == 0
    out, err = capsys.readouterr()
    assert (tmp_path / "r.trace.json").exists() and (tmp_path / "r.trace.parquet").exists(), out
    assert err == "warning: the trace holds only part of tlb: 4 entries were dropped\n"


def _fake_engine_run(monkeypatch):
    """numasim.run as the engine with run.trace will be: the run without the key, plus a `trace`."""
    from numasim.result import Result
    from numasim.scenario import to_toml, tomllib

    real_run = numasim.run
    seen = []

    def run(text, **kw):
        d = tomllib.loads(text)
        seen.append(d["run"].pop("trace"))
        raw = json.loads(real_run(to_toml(d), **kw).to_json())
        raw["trace"] = sim_result()["trace"]
        return Result(json.dumps(raw))

    monkeypatch.setattr(numasim, "run", run)
    return seen


def test_run_with_trace_sets_run_trace_and_writes_both_files(tmp_path, capsys, monkeypatch):
    seen = _fake_engine_run(monkeypatch)
    trace_file = tmp_path / "t.json"
    assert cli.main(["run", str(SMALL_NUMA02), "--trace", str(trace_file)]) == 0
    out = capsys.readouterr().out
    assert seen == [True]
    assert out.rstrip().splitlines()[-2:] == [
        f"trace: {trace_file} (open it in ui.perfetto.dev or chrome://tracing)",
        f"table: {tmp_path / 't.parquet'} (pandas.read_parquet)"]
    assert len([e for e in json.loads(trace_file.read_text())["traceEvents"] if e["name"] == "task_numa_work"]) == 3
    assert cli.main(["run", str(SMALL_NUMA02), "--json", "--trace", str(tmp_path / "j.json")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["trace"] and "trace: " in err, "--json: stdout holds the result alone"


def test_run_trace_option_errors(tmp_path, capsys):
    cases = [(["--trace", str(tmp_path / "t.txt")], "ending in .json or .json.gz"),
             (["--trace", str(tmp_path / "t.json"), "--iterations", "2"], "--trace records one run"),
             (["--trace", str(tmp_path / "t.json"), "--save", str(tmp_path / "t.json")], "the same file as --save"),
             (["--trace", "/proc/t.json"], "cannot write in /proc")]
    for argv, msg in cases:
        assert cli.main(["run", str(SMALL_NUMA02), *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and msg in err, err


# ---------------------------------------------------------------- the engine's run.trace


def _traced_run():
    """A small numa02 run with run.trace."""
    from numasim.scenario import scenario_toml

    return numasim.run(scenario_toml(str(SMALL_NUMA02), overrides=[("run.trace", True)]))


def test_a_real_traced_run_exports():
    r = _traced_run()
    trace = r.raw["trace"]
    evs = events(r.raw)
    work = [e for e in evs if e["name"] == "task_numa_work"]
    assert len(work) == len(trace["scan_windows"]) > 0
    assert all(e["dur"] >= 0 and e["tid"] in {t["pid"] for t in r.raw["tasks"]} for e in work)
    df = to_table(r)
    assert list(df.columns) == TABLE_COLUMNS and (df["kind"] == "task_numa_work").sum() == len(work)
    pages = sum(m.get("succeeded", 0) for m in trace.get("migrate", []) if m.get("reason") == "numa_misplaced")
    assert pages == r.counters["numa_pages_migrated"]


def test_sampled_vmstat_counters_add_up_to_the_counters_change():
    """series.vmstat, which simulated and real-kernel results both have, becomes one counter
    track per counter: each interval's change, whose sum is the counter's change over the run."""
    r = _traced_run()
    vm = r.raw["series"]["vmstat"]
    df = to_table(r)
    steps = df[df["kind"] == "vmstat"]
    for name in ("numa_pte_updates", "numa_hint_faults", "numa_pages_migrated"):
        mine = steps[steps["args"] == json.dumps({"counter": name}, separators=(",", ":"))]
        assert int(mine["value"].sum()) == vm[name][-1] - vm[name][0] > 0, name
    track = [e for e in events(r.raw) if e["name"] == "vmstat numa_hint_faults per sample"]
    assert track and all(e["ph"] == "C" and e["pid"] == KERNEL_PID for e in track)

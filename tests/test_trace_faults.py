"""`numasim validate --trace-faults` and `run.trace_faults`: every hint fault counted by thread,
10 ms and kind, in the guest (a kprobe on task_numa_fault, summed by the init script's awk)
and in the simulator (the same kinds where task_numa_fault is entered)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import numasim
from numasim.realkernel import vm
from numasim.realkernel.console import fault_kinds, parse_console
from numasim.realkernel.pacing import fault_kinds_by_pass
from numasim.realkernel.validate import scenario_dict
from numasim.scenario import to_toml

BUSYBOX = next((p for p in vm.BUSYBOX_PATHS if Path(p).exists()), None)
UNSET = (1 << 21) - 1  # -1 & LAST_CPUPID_MASK with Debian's NR_CPUS_BITS 13 + LAST__PID_SHIFT 8


def guest_awk() -> str:
    """The program the guest's init runs over the trace buffer."""
    m = re.search(r"awk '(/\^#/.*?)' \$T/trace", vm.INIT, re.S)
    assert m, "the init script's trace awk"
    return m.group(1)


def fault_line(pid: int, ts: float, last_cpupid: int, flags: int) -> str:
    return (f"          numaw-{pid}     [002] d..1.  {ts:.6f}: numa_fault_all: (task_numa_fault+0x0/0x4c0) "
            f"last_cpupid={last_cpupid} mem_node=0 pages=1 flags={flags}")


@pytest.mark.skipif(BUSYBOX is None, reason="busybox-static (system-packages.txt) is not installed")
def test_guest_awk_sums_hint_faults_by_thread_10ms_and_kind(tmp_path):
    lines = ["# tracer: nop",
             fault_line(199, 100.0012, UNSET, 8),                 # first touch stamp, local
             fault_line(199, 100.0051, UNSET, 8),                 # same 10 ms, same kind
             fault_line(199, 100.0123, (2 << 8) | 199, 8 | 1),    # its own cpupid, migrated
             fault_line(200, 100.0013, (1 << 8) | 199, 16),       # another thread's, remote, failed
             "          numaw-200     [001] d..1.  100.002000: numa_work: (task_numa_work+0x0/0x300) "
             "w52=3 w48=2028 w44=60000 w40=0 w36=0"]
    trace = tmp_path / "trace"
    trace.write_text("\n".join(lines) + "\n")
    out = subprocess.run([BUSYBOX, "awk", guest_awk(), str(trace)], capture_output=True, text=True, check=True).stdout
    p = parse_console("@nsw begin release=6.1.0-56-amd64 nodes=2 cpus=4 workloads=1 interval_ms=100 epoch=99.5\n" + out)
    rows = {(r["task"], r["t"], r["local"], r["last"], r["migrated"], r["failed"]): r["n"] for r in fault_kinds(p)}
    assert rows == {(199, 0.5, 1, "first", 0, 0): 2, (199, 0.51, 1, "own", 1, 0): 1, (200, 0.5, 0, "other", 0, 1): 1}
    work = [r for r in p["trace"] if r["event"] == "numa_work"]
    assert len(work) == 1 and work[0]["w48"] == 2028 and work[0]["task"] == 200
    assert p["tracecount"]["numa_fault_all"] == 4


def test_simulated_fault_kinds_add_up_to_the_hint_fault_counters():
    d = scenario_dict("reader-writer-4k", "6.1")
    d["run"]["trace_faults"] = True
    d["workload"][0]["process"][0]["thread"][0]["ops"][0]["duration_s"] = 4.0
    d["workload"][0]["process"][0]["thread"][1]["ops"][0]["duration_s"] = 4.0
    r = numasim.run(to_toml(d))
    rows = r.raw["fault_kinds"]
    c = r.counters
    # numa_migrate_prep counts NUMA_HINT_FAULTS (and _LOCAL with TNF_FAULT_LOCAL) for every
    # fault that reaches task_numa_fault
    assert sum(x["n"] for x in rows) == c["numa_hint_faults"] > 0
    assert sum(x["n"] for x in rows if x["local"]) == c["numa_hint_faults_local"]
    assert sum(x["n"] for x in rows if x["migrated"]) == c["numa_pages_migrated"]
    assert {x["last"] for x in rows} <= {"first", "own", "other"}
    # the reader's first pass over pages only the main thread touched: no cpupid yet, remote
    assert any(x["last"] == "first" and not x["local"] for x in rows)
    # each scan window: the scanning thread's seq and period as it entered; a window has a length
    wins = r.raw["scan_windows"]
    assert len(wins) >= 2 and all(w["end"] > w["t"] for w in wins)
    assert wins[0]["period_ms"] == 1000, "the first window: task_scan_start of a 64 MiB process"
    assert [w["t"] for w in wins] == sorted(w["t"] for w in wins)
    passes = fault_kinds_by_pass(r)
    assert sum(p["faults"] for p in passes) == c["numa_hint_faults"]
    assert all(p["pass"] >= 1 for p in passes), "no hint fault before the first window"
    plain = numasim.run(to_toml(scenario_dict("reader-writer-4k", "6.1"))).raw
    assert "fault_kinds" not in plain and "scan_windows" not in plain


def test_trace_faults_must_be_a_boolean():
    d = scenario_dict("reader-writer-4k", "6.1")
    d["run"]["trace_faults"] = "yes"
    with pytest.raises(numasim.ScenarioError, match="trace_faults"):
        numasim.resolve(to_toml(d))


def test_an_overflowed_trace_buffer_is_named_not_taken_for_the_run():
    from numasim.realkernel.console import build_result

    fixture = Path(__file__).parent / "fixtures" / "realkernel" / "remote-toucher-4k-6.12.console"
    text = fixture.read_text() + "@nsw faultagg task=300 ts=100.01 local=1 last=own migrated=0 failed=0 n=1000\n"
    d = scenario_dict("remote-toucher-4k", "6.12")
    r = build_result(parse_console(text), numasim.resolve(to_toml(d)), {"kind": "qemu", "accel": "tcg"})
    assert any("fault_kinds holds 1000 of the run's 33918 hint faults" in w for w in r.raw["source"]["warnings"])

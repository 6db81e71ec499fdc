"""How many task_numa_work windows a pass takes, with a process image (workload/image.rs)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

import numasim
from numasim.realkernel.validate import scenario_dict
from numasim.scenario import to_toml


def windows_between_buffer_scans(version: str) -> list:
    """two-processes-4k on `version`: per process, the windows from one scan of its 256 MiB
    buffer to the next (the buffer's own window included), after the first 10 s."""
    d = scenario_dict("two-processes-4k", version)
    d["run"]["trace"] = True
    r = json.loads(numasim.run(to_toml(d)).to_json())
    by_mm = defaultdict(list)
    for w in r["trace"]["scan_windows"]:
        if w["t"] > 10.0:
            by_mm[w["tgid"]].append(w["pte_updates"] >= 60000)
    out = []
    for flags in by_mm.values():
        starts = [i for i, buffer in enumerate(flags) if buffer]
        out += [b - a for a, b in zip(starts, starts[1:])]
    return out


@pytest.mark.parametrize("version, windows", [("6.12", 4), ("6.1", 2)])
def test_each_vma_the_pid_filter_refused_after_the_buffer_costs_a_window_from_6_7(version, windows):
    # kernel/sched/fair.c: task_numa_work (f169c62ff7cd, 6.7): a window that reaches the last
    # VMA with budget left and PID-refused VMAs force-scans one of them and stops. Above a
    # numaw worker's buffer, the other worker's stack, [vdso] (never hint-faulted: its pages
    # are every process's) and the main thread's stack were never faulted by it: each takes a
    # window, so a pass is 4 windows, as the VM's sched_skip_vma_numa trace shows (6.12,
    # 2026-11-27). 6.1 has no PID filter: the buffer's window, then one to the end.
    gaps = windows_between_buffer_scans(version)
    assert gaps and set(gaps) == {windows}, gaps

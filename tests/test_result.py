"""Result logic on hand-made result JSON (no engine run needed)."""

import json

import pandas as pd
import pytest

from numasim import Result

GIB_PAGES = (1 << 30) // 4096


def make(faults, local, times=None, elapsed=10.0, memory=None, **counters):
    times = times or [float(i) for i in range(1, len(faults) + 1)]
    c = {"numa_hint_faults": faults[-1], "numa_hint_faults_local": local[-1],
         "numa_pages_migrated": 0, "pgmigrate_success": 0, "numa_pte_updates": 0}
    c.update(counters)
    raw = {
        "numasim_version": "0.1.0", "seed": 1,
        "scenario": {"machine": {"topology": {"node_pages": [GIB_PAGES, GIB_PAGES]}},
                     "run": {"max_sim_s": 100.0}},
        "counters": c,
        "times": {"elapsed_s": elapsed, "user_s": 1.0, "system_s": 0.5},
        "processes": [{"pid": 1000, "comm": "numa02"}],
        "series": {
            "vmstat": {"time_s": times, "numa_hint_faults": faults, "numa_hint_faults_local": local},
            "memory": memory or {"time_s": [1.0, 1.0, 2.0, 2.0], "pid": [1000] * 4,
                                 "node": [0, 1, 0, 1], "pages": [100, 0, 60, 40]},
        },
        "sim": {"ticks": 10, "events": {}},
    }
    return Result(json.dumps(raw))


def test_hint_local_percent_whole_run_and_last_fraction():
    # 10 samples; the last 10% (t > 9) adds 100 faults of which 90 local.
    faults = [100 * i for i in range(1, 11)]
    local = [10 * i for i in range(1, 10)] + [90 + 90]
    r = make(faults, local)
    assert r.hint_local_percent() == pytest.approx(100 * 180 / 1000)
    assert r.hint_local_percent(0.1) == pytest.approx(90.0)
    assert r.hint_local_percent(1.0) == pytest.approx(18.0)
    assert r.hint_faults_window(0.1) == (100, 90)
    assert r.hint_faults_window() == (1000, 180)


def test_hint_local_tail_reaches_back_to_the_last_faults():
    # faults stop at t=7 (the last scan window, 100 faults, 95 local); the last 10% has none
    faults = [0, 0, 100, 200, 300, 400, 500, 500, 500, 500]
    local = [0, 0, 10, 20, 30, 40, 135, 135, 135, 135]
    r = make(faults, local)
    assert r.hint_faults_window(0.1) == (0, 0)
    pct, n, start = r.hint_local_tail(0.1)
    assert (n, start) == (100, 6.0)
    assert pct == pytest.approx(95.0)
    # with faults inside the last 10%, the window is the plain last 10%
    r2 = make([100 * i for i in range(1, 11)], [10 * i for i in range(1, 10)] + [180])
    assert r2.hint_local_tail(0.1) == (pytest.approx(90.0), 100, pytest.approx(9.0))


def test_hint_local_percent_is_100_without_faults():
    r = make([0, 0, 0], [0, 0, 0], elapsed=3.0)
    assert r.hint_local_percent() == 100.0
    assert r.hint_local_percent(0.1) == 100.0
    with pytest.raises(ValueError):
        r.hint_local_percent(0.0)


def test_frames():
    r = make([1, 2], [1, 1])
    assert isinstance(r.vmstat, pd.DataFrame) and r.vmstat.index.name == "time_s"
    assert list(r.memory.columns) == ["time_s", "pid", "node", "pages", "mib"]  # mib: issue 31
    pivot = r.memory_per_node()
    assert pivot.loc[2.0, (1000, 1)] == 40
    assert list(pivot.index) == [1.0, 2.0]


def test_invariants_pass_on_consistent_data():
    make([1, 2, 3], [0, 1, 2]).check_invariants()


@pytest.mark.parametrize("kwargs, message", [
    (dict(faults=[1, 2], local=[1, 3]), "numa_hint_faults_local"),
    (dict(faults=[1, 2], local=[0, 0], numa_pages_migrated=5, pgmigrate_success=4), "numa_pages_migrated"),
    (dict(faults=[1, 2], local=[0, 0], pgfault=-1), "negative"),
    (dict(faults=[3, 2], local=[0, 0]), "decreases"),
    (dict(faults=[1, 2], local=[0, 0], times=[2.0, 1.0]), "time_s"),
    (dict(faults=[1, 2], local=[0, 0],
          memory={"time_s": [1.0], "pid": [1], "node": [0], "pages": [GIB_PAGES + 1]}), "capacity"),
])
def test_invariants_catch_violations(kwargs, message):
    with pytest.raises(AssertionError, match=message):
        make(**kwargs).check_invariants()


def test_save_load_round_trip(tmp_path):
    r = make([1, 2], [1, 1])
    r.save(tmp_path / "r.json")
    assert Result.load(tmp_path / "r.json").to_json() == r.to_json()

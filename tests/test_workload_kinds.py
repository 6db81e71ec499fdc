"""The non-autonuma workloads through the public API: pmbench, memory eater, syscall loops."""

import pytest

import numasim

MACHINE = {"profile": "intel-2s-128g", "cpus_per_node": 8, "memory_gib_per_node": 2}


def test_pmbench_with_eater_reports_throughput_histogram_and_migrations():
    r = numasim.run({
        "machine": MACHINE,
        "workload": [
            {"kind": "memory_eater", "size_gib": 1.5, "node": 1, "free_at_s": 4.0},
            {"kind": "pmbench", "processes": 2, "threads": 4, "set_mib": 512, "pattern": "normal",
             "shape": 21845.0, "nodes": [1], "duration_s": 6.0, "start_s": 2.0},
        ],
    })
    r.check_invariants()
    pm = [p for p in r.processes if p["comm"] == "pmbench"]
    assert len(pm) == 2 and all(p["throughput_aps"] > 1e6 for p in pm)
    hist = pm[0]["latency_hist"]
    assert len(hist["bucket_ns"]) == len(hist["count"]) and sum(hist["count"]) > 1e6
    assert r.counters["numa_pages_migrated"] > 10_000, "spilled pages come back after the eater dies"


def test_migratepages_and_move_pages_loops():
    r = numasim.run({
        "machine": MACHINE,
        "kernel": {"numa_balancing": False},
        "workload": [
            {"kind": "pmbench", "threads": 4, "set_mib": 256, "duration_s": 3.0},
            {"kind": "migratepages", "target": 0, "from": 0, "to": 1, "loops": 1, "start_s": 0.5},
            {"kind": "move_pages", "target": 0, "node": 0, "size_mib": 16, "start_s": 2.0},
        ],
    })
    r.check_invariants()
    assert r.counters["pgmigrate_success"] > 0
    assert r.counters["numa_pages_migrated"] == 0


@pytest.mark.parametrize("bad, needle", [
    ({"kind": "pmbench", "threads": 2}, "duration_s"),
    ({"kind": "pmbench", "duration_s": 1.0, "pattern": "linear", "shape": 4.0}, "stride 1"),
    ({"kind": "pmbench", "duration_s": 1.0, "pattern": "zipf"}, "zipf"),
    ({"kind": "pmbench", "duration_s": 1.0, "passes": 3}, "does not apply"),
    ({"kind": "memory_eater", "size_gib": 1.0}, "free_at_s"),
    ({"kind": "migratepages", "target": 0}, "another [[workload]]"),
])
def test_bad_workload_keys_are_scenario_errors(bad, needle):
    with pytest.raises(numasim.ScenarioError) as e:
        numasim.run({"machine": MACHINE, "workload": [bad]})
    assert any(needle in x["msg"] or needle in x["loc"] for x in e.value.errors), e.value.errors


def test_memory_eater_is_killed_at_free_at_s_mid_fill():
    """Issue 29, item 5: an 8 GiB eater with free_at_s = 2 on the default machine needs ~5.8 s
    to fill; it is killed at 2 s all the same, its pages freed, and the run ends there."""
    r = numasim.run({"workload": [{"kind": "memory_eater", "size_gib": 8.0, "free_at_s": 2.0}]})
    eater = next(p for p in r.processes if p["comm"] == "memhog")
    assert eater["elapsed_s"] == pytest.approx(2.0, abs=1e-9)
    assert r.elapsed_s == pytest.approx(2.0, abs=0.004)  # within the kill's tick
    assert 0 < r.counters["pgalloc_normal"] < 8 * 262144, "killed before the fill ended"
    assert r.counters["pgfree"] == r.counters["pgalloc_normal"]

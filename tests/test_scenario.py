"""Scenario assembly in Python: TOML writer, --set overrides, shortcuts."""

import pytest

from numasim.scenario import (
    UsageError,
    apply_overrides,
    load_scenario,
    parse_set,
    scenario_toml,
    to_toml,
    tomllib,
)

from conftest import SMALL_NUMA02


def test_to_toml_round_trips():
    d = {
        "seed": 3,
        "machine": {"profile": "intel-4s-48c", "distances": [[10, 21], [21, 10]],
                    "memory_gib_per_node": 1.5, "cost": {"smt_share": 0.4}},
        "kernel": {"numa_balancing": False, "features": {"numa-delay-map": True},
                   "sysctl": {"numa_balancing_scan_size_mb": 64}},
        "workload": [{"kind": "numa02", "size_mib": 64}, {"kind": "numa01", "start_s": 0.5}],
        "note": 'quote " backslash \\ newline \n tab \t é',
    }
    assert tomllib.loads(to_toml(d)) == d


def test_to_toml_drops_none():
    assert tomllib.loads(to_toml({"seed": None, "run": {"max_sim_s": None, "x": 1}})) == {"run": {"x": 1}}


@pytest.mark.parametrize("expr, key, value", [
    ("workload.size_mib=64", "workload.size_mib", 64),
    ("kernel.numa_balancing=false", "kernel.numa_balancing", False),
    ("machine.distances=[[10,21],[21,10]]", "machine.distances", [[10, 21], [21, 10]]),
    ("machine.profile=intel-4s-48c", "machine.profile", "intel-4s-48c"),
    ("machine.memory_gib_per_node = 2.5", "machine.memory_gib_per_node", 2.5),
])
def test_parse_set(expr, key, value):
    assert parse_set(expr) == (key, value)


@pytest.mark.parametrize("expr", ["noequals", "=3"])
def test_parse_set_rejects(expr):
    with pytest.raises(UsageError):
        parse_set(expr)


def test_overrides_reach_every_workload_or_one_by_index():
    d = {"workload": [{"kind": "numa02"}, {"kind": "numa01"}]}
    apply_overrides(d, {"workload.passes": 5, "workload.1.size_mib": 32, "machine.nodes": 4})
    assert d == {"workload": [{"kind": "numa02", "passes": 5},
                              {"kind": "numa01", "passes": 5, "size_mib": 32}],
                 "machine": {"nodes": 4}}
    with pytest.raises(UsageError):
        apply_overrides(d, {"workload.7.passes": 1})
    with pytest.raises(UsageError):
        apply_overrides(d, {"machine.nodes.x": 1})


def test_override_creates_workload_array():
    d = apply_overrides({}, {"workload.kind": "numa02"})
    assert d == {"workload": [{"kind": "numa02"}]}


def test_shortcut_builds_scenario():
    d = tomllib.loads(scenario_toml(workload="numa02", balancing="off", seed=5, size_mib=64,
                                    features={"numa-delay-map": False}))
    assert d == {
        "seed": 5,
        "machine": {"profile": "xeon-platinum-2n-128c"},
        "kernel": {"numa_balancing": False, "features": {"numa-delay-map": False}},
        "workload": [{"kind": "numa02", "size_mib": 64}],
    }


def test_toml_text_without_changes_passes_through_verbatim():
    text = SMALL_NUMA02.read_text()
    assert scenario_toml(text) == text
    assert scenario_toml(SMALL_NUMA02) == text
    assert scenario_toml(str(SMALL_NUMA02)) == text


def test_file_plus_overrides():
    d = tomllib.loads(scenario_toml(SMALL_NUMA02, balancing=False, seed=9, passes=3))
    assert d["seed"] == 9 and d["kernel"]["numa_balancing"] is False
    assert d["workload"] == [{"kind": "numa02", "size_mib": 64, "passes": 3, "image": "none"}]


def test_dict_source_is_not_mutated():
    src = {"workload": [{"kind": "numa02"}]}
    scenario_toml(src, seed=2, passes=1)
    assert src == {"workload": [{"kind": "numa02"}]}


def test_load_scenario():
    assert load_scenario(SMALL_NUMA02)["workload"][0]["size_mib"] == 64
    with pytest.raises(FileNotFoundError):
        load_scenario("does/not/exist.toml")


def test_bad_balancing_word():
    with pytest.raises(UsageError):
        scenario_toml(workload="numa02", balancing="maybe")


def test_pgo_training_scenarios_resolve():
    # scripts/build-engine.sh runs these to train the profile-guided build: a stale key would
    # fail every `make setup`, so catch it here with the engine's own validation
    import pathlib

    import numasim

    files = sorted(pathlib.Path(__file__).parent.parent.joinpath("scripts", "pgo").glob("*.toml"))
    assert len(files) >= 5
    for f in files:
        r = numasim.resolve(f.read_text())
        assert r["workloads"], f.name

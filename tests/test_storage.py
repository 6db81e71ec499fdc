"""Results on disk (docs/results.md): JSON + Parquet sidecars round-trip, groups of
iterations, column names; `numasim run --iterations N --save DIR`."""

import json

import pandas as pd
import pytest

import numasim
from conftest import SMALL_NUMA02, SMALL_OVERRIDES, SMALL_SETS, numasim_cli
from numasim import storage
from numasim.repeat import iteration_scenarios, run_iterations
from numasim.scenario import UsageError

# long enough for one tasks/placement sample (every 100 ms here)
SERIES = {"run.placement_interval_ms": 100}


@pytest.fixture(scope="module")
def result():
    return numasim.run(SMALL_NUMA02, overrides=SERIES)


def test_save_round_trips_json_and_parquet_sidecars(tmp_path, result):
    path = tmp_path / "r.json"
    written = storage.save_result(result, path)
    assert [p.name for p in written] == ["r.json", "r.vmstat.parquet", "r.memory.parquet",
                                         "r.tasks.parquet", "r.placement.parquet"]
    back = storage.load_result(path)
    assert back.to_json() == result.to_json()  # the engine's JSON byte for byte
    # pandas users read the sidecars directly and get the Result's frames
    vm = pd.read_parquet(tmp_path / "r.vmstat.parquet")
    pd.testing.assert_frame_equal(vm, result.vmstat)
    assert vm.index.name == "time_s" and vm["numa_hint_faults"].iloc[-1] == result.counters["numa_hint_faults"]
    pd.testing.assert_frame_equal(storage.read_sidecar(path, "memory"), result.memory)
    tasks = storage.read_sidecar(path, "tasks")
    assert set(tasks.columns) == {"time_s", "tid", "pid", "cpu_node", "preferred_nid"} and len(tasks) > 0
    place = storage.read_sidecar(path, "placement")
    # the placement map adds up to the resident pages of the same sample
    t = place["time_s"].iloc[-1]
    mem = result.memory
    assert place[place["time_s"] == t]["pages"].sum() == mem[mem["time_s"] == t]["pages"].sum()


def test_save_without_parquet_writes_only_json(tmp_path, result):
    assert storage.save_result(result, tmp_path / "a" / "r.json", parquet=False) == [tmp_path / "a" / "r.json"]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["r.json"]


def test_groups_and_column_names(tmp_path, result):
    for col in ("off", "on"):
        storage.save_iterations([result, result], tmp_path / col / "numa02", scenario_text="seed = 1\n")
    (tmp_path / "on" / "notes.json").write_text(json.dumps({"not": "a result"}))
    group = storage.load_group(tmp_path / "on")
    # found recursively; notes.json is not a result and is left out
    assert [f.relative_to(tmp_path / "on").as_posix() for f, _ in group] == ["numa02/iter-01.json",
                                                                             "numa02/iter-02.json"]
    # saving a smaller group in the same place replaces the old one
    storage.save_iterations([result], tmp_path / "on" / "numa02")
    assert [f.name for f, _ in storage.load_group(tmp_path / "on")] == ["iter-01.json"]
    assert not (tmp_path / "on" / "numa02" / "iter-02.vmstat.parquet").exists()
    storage.save_iterations([result, result], tmp_path / "on" / "numa02", scenario_text="seed = 1\n")
    cols = storage.load_columns([tmp_path / "off", tmp_path / "on"])
    assert [c.name for c in cols] == ["off", "on"] and len(cols[1].results) == 2
    # same stems: lengthened with the parent folder; NAME=PATH wins
    cols = storage.load_columns([tmp_path / "off" / "numa02", tmp_path / "on" / "numa02"])
    assert [c.name for c in cols] == ["off/numa02", "on/numa02"]
    assert cols[0].scenario_text == "seed = 1\n"
    cols = storage.load_columns([f"base={tmp_path / 'off'}", tmp_path / "on" / "numa02" / "iter-02.json"])
    assert [c.name for c in cols] == ["base", "iter-02"] and cols[1].scenario_text is None
    with pytest.raises(UsageError, match="not a numasim result"):
        storage.load_columns([tmp_path / "on" / "notes.json"])


def test_iteration_seeds_and_parallel_equals_serial():
    seeds = [s for s, _ in iteration_scenarios(SMALL_NUMA02, 3)]
    assert seeds == [7, 8, 9]  # the fixture's seed, then +1, +2
    assert [s for s, _ in iteration_scenarios(SMALL_NUMA02, 2, seed=40)] == [40, 41]
    serial = run_iterations(SMALL_NUMA02, 2, jobs=1)
    parallel = run_iterations(SMALL_NUMA02, 2, jobs=2)
    assert [r.seed for r in parallel] == [7, 8]
    assert [r.to_json() for r in serial] == [r.to_json() for r in parallel]
    assert parallel[1].to_json() == numasim.run(SMALL_NUMA02, seed=8).to_json()
    with pytest.raises(UsageError):
        iteration_scenarios(SMALL_NUMA02, 0)


def test_cli_run_iterations_save_dir(tmp_path):
    out = tmp_path / "on"
    p = numasim_cli("run", "--workload", "numa02", *SMALL_SETS, "--seed", "5", "--iterations", "3",
                    "--save", out)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""  # not a terminal: no progress output
    assert "3 iterations, seeds 5..7" in p.stdout and "Amean     elsp-NUMA02" in p.stdout
    files = sorted(x.name for x in out.iterdir())
    assert [f for f in files if f.endswith(".json")] == ["iter-01.json", "iter-02.json", "iter-03.json"]
    assert "iter-03.vmstat.parquet" in files and "scenario.toml" in files
    seeds = [json.loads((out / f"iter-0{i}.json").read_text())["seed"] for i in (1, 2, 3)]
    assert seeds == [5, 6, 7]
    # the saved scenario reproduces iteration 2 exactly with its seed
    again = numasim.run((out / "scenario.toml").read_text(), seed=6)
    assert again.to_json() == (out / "iter-02.json").read_text()
    for k, v in SMALL_OVERRIDES.items():
        assert str(v) in (out / "scenario.toml").read_text(), k
    p = numasim_cli("run", "--workload", "numa02", *SMALL_SETS, "-n", "2", "--json")
    runs = json.loads(p.stdout)
    assert [r["seed"] for r in runs] == [1, 2]
    p = numasim_cli("run", "--workload", "numa02", "-n", "0")
    assert p.returncode == 2 and "iterations" in p.stderr

"""The tidy Python API (issue 31 item 4): Result.tasks, .placement, .thread_nodes(),
.summary(), numasim.load_results, Comparison.to_frame, MiB columns."""

import json

import pytest

import numasim
from conftest import SMALL_NUMA02, SMALL_SETS, numasim_cli
from numasim.compare import Column, compare
from numasim.frames import SUMMARY_COUNTERS
from numasim.storage import load_columns

SERIES = {"run.placement_interval_ms": 100}  # a tasks/placement sample every 100 ms


@pytest.fixture(scope="module")
def sampled():
    return numasim.run(SMALL_NUMA02, overrides=SERIES)


def test_tasks_frame(sampled):
    t = sampled.tasks
    assert list(t.columns) == ["time_s", "pid", "tid", "comm", "cpu_node", "preferred_nid"]
    assert len(t) == len(sampled.raw["series"]["tasks"]["tid"]) > 0
    assert t["time_s"].is_monotonic_increasing
    nodes = sampled.sim["nr_nodes"]
    assert t["cpu_node"].between(0, nodes - 1).all()
    assert t["preferred_nid"].between(-1, nodes - 1).all()
    assert set(t["comm"]) == {"numa02"}
    # every thread of the process is sampled at every sample time
    threads = sampled.processes[0]["threads"]
    assert (t.groupby("time_s").size() == threads).all()


def test_placement_frame_matches_memory(sampled):
    p = sampled.placement
    assert list(p.columns) == ["time_s", "pid", "bucket", "node", "pages", "mib"]
    assert p["time_s"].is_monotonic_increasing and len(p) > 0
    assert p["node"].between(0, sampled.sim["nr_nodes"] - 1).all()
    assert p["bucket"].between(0, 63).all()
    assert (p["mib"] == p["pages"] * 4096 / 2**20).all()
    # the buffer is the whole mapping (image = "none"): placement adds up to the resident MiB
    mem = sampled.memory.groupby("time_s")["mib"].sum()
    placed = p.groupby("time_s")["mib"].sum()
    assert (placed == mem.loc[placed.index]).all()


def test_thread_nodes_counts_threads(sampled):
    tn = sampled.thread_nodes()
    assert list(tn.columns) == ["time_s", "pid", "comm", "node", "threads"]
    assert (tn.groupby(["time_s", "pid"])["threads"].sum() == sampled.processes[0]["threads"]).all()


def test_unsampled_run_gives_empty_frames_with_columns(small_result):
    assert small_result.tasks.empty and list(small_result.tasks.columns)[0] == "time_s"
    assert small_result.placement.empty and list(small_result.placement.columns)[0] == "time_s"


def test_memory_mib(small_result):
    m = small_result.memory
    assert list(m.columns) == ["time_s", "pid", "node", "pages", "mib"]
    last = m[m["time_s"] == m["time_s"].max()]
    assert last["mib"].sum() == pytest.approx(64.0)  # the 64 MiB buffer


def test_summary_matches_result(small_result):
    s = small_result.summary()
    assert len(s) == 1
    row = s.iloc[0]
    for k in SUMMARY_COUNTERS:
        assert row[k] == small_result.counters.get(k, 0), k
    for k in ("elapsed_s", "user_s", "system_s"):
        assert row[k] == small_result.times[k]
    assert row["seed"] == 7 and row["completed"] and row["scenario"] == "NUMA02"
    assert row["machine"] == "xeon-platinum-2n-128c" and row["run_id"] == small_result.run_id
    assert row["numa_pages_migrated_mib"] == small_result.counters["numa_pages_migrated"] / 256
    assert row["hint_local_percent"] == small_result.hint_local_percent()


def test_load_results_of_saved_runs(tmp_path, small_result):
    a = numasim.run(SMALL_NUMA02, seed=11)
    (tmp_path / "x").mkdir()
    small_result.save(tmp_path / "x" / "a.json")
    a.save(tmp_path / "x" / "b.json")
    (tmp_path / "x" / "notes.json").write_text(json.dumps({"not": "a result"}))
    df = numasim.load_results(tmp_path)
    assert list(df.columns[:2]) == ["path", "scenario"]
    assert list(df["seed"]) == [7, 11]
    assert list(df["numa_hint_faults"]) == [small_result.counters["numa_hint_faults"],
                                            a.counters["numa_hint_faults"]]
    one = numasim.load_results(tmp_path / "x" / "b.json")
    assert len(one) == 1 and one["run_id"][0] == a.run_id


def test_load_results_of_a_cli_group(tmp_path):
    out = tmp_path / "on" / "numa02"
    p = numasim_cli("run", SMALL_NUMA02, *SMALL_SETS, "--iterations", "2", "--seed", "3",
                    "--save", f"{out}/")
    assert p.returncode == 0, p.stderr
    df = numasim.load_results(tmp_path / "on")
    assert len(df) == 2 and list(df["seed"]) == [3, 4]
    assert [str(x).rsplit("/", 1)[1] for x in df["path"]] == ["iter-01.json", "iter-02.json"]


def test_load_results_bad_input(tmp_path):
    with pytest.raises(numasim.NumasimError, match="no numasim result"):
        numasim.load_results(tmp_path)  # an empty directory
    bad = tmp_path / "r.json"
    bad.write_text('{"counters": {')
    with pytest.raises(numasim.NumasimError, match="invalid JSON"):
        numasim.load_results(tmp_path)
    with pytest.raises(FileNotFoundError):
        numasim.load_results(tmp_path / "missing.json")


def test_comparison_to_frame(tmp_path, small_result):
    other = numasim.run(SMALL_NUMA02, seed=11)
    cmp = compare([Column("base", [small_result]), Column("new", [other])])
    f = cmp.to_frame()
    assert list(f.columns) == ["section", "metric", "stat", "column", "value", "pct", "significant"]
    assert len(f) == 2 * sum(len(s.rows) for s in cmp.sections)
    elsp = f[(f["metric"] == "elsp-NUMA02") & (f["stat"] == "Amean")].set_index("column")
    assert elsp.loc["base", "value"] == small_result.elapsed_s
    assert elsp.loc["new", "value"] == other.elapsed_s
    want = 100 - other.elapsed_s * 100 / small_result.elapsed_s  # lower is better
    assert elsp.loc["new", "pct"] == pytest.approx(want)
    faults = f[f["metric"] == "NUMA hint faults"].set_index("column")["value"]
    assert faults["new"] == other.counters["numa_hint_faults"]
    assert f[f["metric"] == "Duration Elapsed"]["pct"].isna().all()
    # the same through saved files, as `numasim compare` reads them
    small_result.save(tmp_path / "base.json")
    other.save(tmp_path / "new.json")
    again = compare(load_columns([tmp_path / "base.json", tmp_path / "new.json"])).to_frame()
    assert again.equals(f)

"""`numasim examples`: the shipped example scenarios, listed, copied out, and each running
to the end doing what its comment says (issue 29, item 13)."""

import pytest

import numasim
from conftest import numasim_cli
from numasim import examples

NAMES = ["four-node-mix", "kvm-guest", "memory-eater-pmbench", "memory-tiering", "migratepages-loop", "reader-writer"]


def test_the_examples_are_listed_with_what_they_show():
    assert examples.names() == NAMES
    p = numasim_cli("examples")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert [line.split()[0] for line in lines] == NAMES
    assert all(len(line.split(None, 1)[1]) > 20 for line in lines)


def test_copy_writes_the_example_out_and_keeps_an_existing_file(tmp_path):
    p = numasim_cli("examples", "copy", "kvm-guest", tmp_path)
    out = tmp_path / "kvm-guest.toml"
    assert p.returncode == 0 and out.read_text() == examples.path("kvm-guest").read_text()
    out.write_text("mine")
    again = numasim_cli("examples", "copy", "kvm-guest", out)
    assert again.returncode == 2 and "exists" in again.stderr and out.read_text() == "mine"
    forced = numasim_cli("examples", "copy", "kvm-guest", out, "--force")
    assert forced.returncode == 0 and out.read_text() != "mine"
    shown = numasim_cli("examples", "copy", "migratepages-loop", "-")
    assert shown.stdout == examples.path("migratepages-loop").read_text()


def test_an_unknown_example_names_the_known_ones():
    p = numasim_cli("examples", "copy", "nope")
    assert p.returncode == 2 and "migratepages-loop" in p.stderr and "Traceback" not in p.stderr


@pytest.fixture(scope="module")
def ran():
    return {n: numasim.run(examples.path(n)) for n in NAMES}


def test_every_example_runs_to_the_end(ran):
    for name, r in ran.items():
        assert r.completed, name
        r.check_invariants()


def test_four_node_mix_runs_three_kinds_on_four_nodes(ran):
    r = ran["four-node-mix"]
    assert r.sim["nr_nodes"] == 4
    assert {w["kind"] for w in r.scenario["workloads"]} == {"numa01_THREAD_ALLOC", "pmbench", "xfs_repair"}
    assert r.counters["numa_pages_migrated"] > 0


def test_memory_eater_pushes_pmbench_off_node_1_until_it_is_killed(ran):
    r = ran["memory-eater-pmbench"]
    m = r.memory
    pmbench = [p["pid"] for p in r.processes if p["comm"] == "pmbench"]
    during = m[(m.time_s > 2.0) & (m.time_s < 3.0) & m.pid.isin(pmbench)].groupby("node")["pages"].sum()
    assert during.get(0, 0) > 0.3 * during.sum()  # node 1 was full: a good part landed on node 0
    end = r.process_memory()
    assert all(end.loc[i, "Node 0"] < 1 for i in end.index if "pmbench" in i)  # migrated back
    assert r.counters["numa_pages_migrated"] > 0


def test_migratepages_loop_migrates_by_the_system_call_only(ran):
    r = ran["migratepages-loop"]
    # 4 loops of two calls, each moving the 128 MiB buffer (32768 pages)
    assert r.counters["numa_hint_faults"] == 0 and r.counters["pgmigrate_success"] >= 8 * 32768


def test_kvm_guest_zaps_the_guests_sptes(ran):
    r = ran["kvm-guest"]
    stats = r.raw["kvm"][0]["stats"]
    assert r.raw["kvm"][0]["vcpus"] == 4 and stats["sptes_zapped"] > 0 and stats["ept_violations"] > 0, stats


def test_memory_tiering_promotes_pmbench_and_demotes_the_eaters(ran):
    """numa_balancing = 2: pmbench's hot pages move from PMEM (nodes 2, 3) to DRAM while kswapd
    demotes the eaters' cold ones, which end partly on PMEM."""
    r = ran["memory-tiering"]
    c = r.counters
    assert c["pgpromote_success"] == c["numa_pages_migrated"] > 100_000
    assert c["pgdemote_kswapd"] > 100_000 and c["pgpromote_candidate"] >= c["pgpromote_success"]
    m = r.memory
    pmbench = {p["pid"] for p in r.processes if p["comm"] == "pmbench"}
    last = m[m["time_s"] == m[~m["pid"].isin(pmbench)]["time_s"].max()]  # the eaters' last sample
    bench, eaters = last[last["pid"].isin(pmbench)], last[~last["pid"].isin(pmbench)]
    assert bench[bench["node"] < 2]["pages"].sum() > 4 * bench[bench["node"] >= 2]["pages"].sum()
    assert eaters[eaters["node"] >= 2]["pages"].sum() > 0


def test_reader_writer_moves_what_only_the_reader_touches(ran):
    r = ran["reader-writer"]
    end = r.process_memory()  # MiB per node of the one process
    row = end.loc[[i for i in end.index if "program" in i][0]]
    assert row["Node 1"] > 0.9 * 224 and row["Node 0"] < 1.2 * 32 + 16, row
    assert r.counters["numa_pages_migrated"] >= 0.9 * 224 * 256

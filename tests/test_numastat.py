"""Per-node views as numastat(8) shows them: the per-node numa_hit/miss/foreign/local/other
counters and each process's memory per node (issue 29, item 15)."""

import re

from conftest import SMALL_NUMA02, numasim_cli
from numasim import numastat

PAIRS = {"numa_hit": "numa_hit", "numa_miss": "numa_miss", "numa_foreign": "numa_foreign",
         "local_node": "numa_local", "other_node": "numa_other"}


def test_per_node_counters_sum_to_the_vmstat_ones(small_result):
    df = small_result.numastat()
    assert list(df.columns) == ["node0", "node1"]
    assert list(df.index) == numastat.NUMASTAT_ROWS
    for row, counter in PAIRS.items():
        assert df.loc[row].sum() == small_result.counters[counter], row
    # numa02 zeroes its buffer from one thread, on node 0; migrations fill node 1
    assert df.loc["numa_hit", "node0"] > 0 and df.loc["numa_hit", "node1"] > 0


def test_a_fallback_allocation_counts_miss_on_the_giver_and_foreign_on_the_preferred():
    import numasim

    # 300 MiB on a node of 256 MiB: the first-touching thread's node 0 overflows onto node 1
    r = numasim.run(SMALL_NUMA02, overrides={"machine.memory_gib_per_node": [0.25, 1.0], "workload.size_mib": 300,
                                             "kernel.numa_balancing": False})
    df = r.numastat()
    assert df.loc["numa_miss", "node1"] > 0 and df.loc["numa_foreign", "node0"] == df.loc["numa_miss", "node1"]
    assert df.loc["numa_miss", "node0"] == 0


def test_process_memory_is_each_process_last_sample_in_mib(small_result):
    table = small_result.process_memory()
    assert list(table.columns) == ["Node 0", "Node 1", "Total"]
    [row] = table.index
    assert row.endswith("(numa02)")
    m = small_result.memory
    pid = int(row.split()[0])
    last = m[(m.pid == pid) & (m.time_s == m[m.pid == pid].time_s.max())]
    assert table.loc[row, "Total"] == last.pages.sum() / 256
    assert abs(table.loc[row, "Total"] - 64) < 1  # the 64 MiB buffer


def test_the_run_summary_prints_both_numastat_layouts():
    p = numasim_cli("run", SMALL_NUMA02)
    assert p.returncode == 0
    out = p.stdout
    assert "Per-node process memory usage (in MBs)" in out
    assert re.search(r"^PID\s+Node 0\s+Node 1\s+Total$", out, re.M)
    assert re.search(r"^\d+ \(numa02\)\s+[\d.]+\s+[\d.]+\s+6[34]\.\d\d$", out, re.M), out
    assert re.search(r"^\s+node0\s+node1$", out, re.M)
    for row in numastat.NUMASTAT_ROWS:
        assert re.search(rf"^{row}\s+\d+\s+\d+$", out, re.M), row

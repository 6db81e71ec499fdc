"""Memory tiering (issue 30): kernel.numa_balancing = 2/3 promotes hot pages from a CPU-less
kmem node and kswapd demotes cold ones, by each release's rules (docs/model.md, "Memory
tiering"). A memory eater holds most of the DRAM node; pmbench's hot set then starts mostly
on the slow node."""

import pytest

import numasim
from conftest import TIERED_KERNEL, TIERED_MACHINE
from numasim.exceptions import ScenarioError, SimulationError

SCENARIO = TIERED_MACHINE + """[machine.cost]
# a CXL-like node: 3x DRAM's latency, a fifth of its bandwidth
latency_ns = [[90.0, 270.0], [270.0, 90.0]]
node_bandwidth_gibps = [143.0, 30.0]
[[workload]]
kind = "memory_eater"
size_gib = 1.5
node = 0
free_at_s = 21.5
[[workload]]
kind = "pmbench"
threads = 4
set_mib = 1536
pattern = "normal"
shape = 40000
start_s = 2.0
duration_s = 20
"""


def run(version="6.12", mode=2, **overrides):
    o = {"kernel.version": version, "kernel.numa_balancing": mode}
    o.update(overrides)
    return numasim.run(SCENARIO, overrides=o)


@pytest.fixture(scope="module")
def runs():
    return {
        "6.12 mode 2": run(),
        "6.12 mode 1": run(mode=1),
        "6.12 no demotion": run(**{"kernel.sysctl.demotion_enabled": False}),
        "5.19 mode 2": run("5.19"),
        "6.12 10 MB/s": run(**{"kernel.sysctl.numa_balancing_promote_rate_limit_MBps": 10}),
    }


def c(r, name):
    return r.counters.get(name, 0)


def test_tiering_promotes_hot_pages_and_demotes_cold_ones(runs):
    r = runs["6.12 mode 2"]
    assert r.completed
    # c574bbe91703: promotions are NUMA migrations into the top tier
    assert c(r, "pgpromote_success") == c(r, "numa_pages_migrated") > 10_000
    # a full DRAM node refuses promotions and wakes kswapd, which demotes to the promo watermark
    assert c(r, "pgdemote_kswapd") > 10_000
    # c6833e10008f: every promotion was a candidate first (no free-space bypass on a 2 GiB node)
    assert c(r, "pgpromote_candidate") >= c(r, "pgpromote_success")
    # the hot set moves to DRAM: pmbench runs faster than with normal balancing (mode 1)
    assert r.processes[1]["throughput_aps"] > 1.05 * runs["6.12 mode 1"].processes[1]["throughput_aps"]


def test_normal_mode_neither_promotes_by_hotness_nor_demotes(runs):
    r = runs["6.12 mode 1"]
    # mode 1: allocations fall back to the slow node at the low watermark (no kswapd); a hint
    # fault on a lower-tier page migrates only through the cpupid filter into a full node
    assert c(r, "pgdemote_kswapd") == 0 and c(r, "pgpromote_candidate") == 0
    assert c(r, "numa_pages_migrated") < c(runs["6.12 mode 2"], "numa_pages_migrated") / 10


def test_without_demotion_kswapd_has_nothing_to_reclaim(runs):
    r, base = runs["6.12 no demotion"], runs["6.12 mode 2"]
    assert c(r, "pgdemote_kswapd") == 0
    # promotions stop once DRAM's free pages reach its high watermark (migrate_balanced_pgdat)
    assert c(r, "pgpromote_success") < c(base, "pgpromote_success") / 5


def test_5_19_has_the_tiering_mode_without_hot_page_selection(runs):
    r = runs["5.19 mode 2"]
    # 5.18: promotion through the two-stage filter; the candidate counter came with 6.1
    assert c(r, "pgpromote_success") > 10_000 and c(r, "pgpromote_candidate") == 0
    assert c(r, "pgdemote_kswapd") > 0


def test_rate_limit_caps_promotion(runs):
    r, base = runs["6.12 10 MB/s"], runs["6.12 mode 2"]
    promoted_mb = c(r, "pgpromote_success") * 4096 / 1e6
    assert promoted_mb <= 10 * 21, "at most the candidates 10 MB/s allows over the run"
    assert c(r, "pgpromote_success") < c(base, "pgpromote_success") / 4
    assert c(r, "pgpromote_candidate") > c(r, "pgpromote_success"), "limited candidates still count"


# Two memory eaters bound to the 2 GiB DRAM node (MPOL_BIND): the first holds 1.5 GiB, asleep;
# the second fills 1 GiB from 2 s, faster than kswapd (one tick of CPU per tick) demotes.
EATERS = TIERED_MACHINE + """[[workload]]
kind = "memory_eater"
size_gib = 1.5
node = 0
free_at_s = 8
[[workload]]
kind = "memory_eater"
size_gib = 1.0
node = 0
start_s = 2.0
free_at_s = 6
"""


def test_a_bound_eater_past_the_free_memory_demotes_by_direct_reclaim():
    # mm/page_alloc.c: __alloc_pages_direct_reclaim -> try_to_free_pages: an allocation that
    # finds the bound node below its min watermark demotes cold folios itself (the sleeping
    # eater's) instead of failing; before 2026-11-27 this run ended in the simulated OOM at 2.36 s
    r = numasim.run(EATERS)
    assert r.completed
    assert c(r, "pgdemote_direct") > 1000 and c(r, "pgdemote_kswapd") > 0
    # the second eater's faults paid for its reclaim: more system time per page than the first's
    per_page = [p["system_s"] / (size * 262144) for p, size in zip(r.processes, [1.5, 1.0])]
    assert per_page[1] > 1.1 * per_page[0], per_page


def test_a_bound_eater_without_demotion_runs_out_of_memory():
    # nothing to reclaim (no swap modelled, demotion off): should_reclaim_retry gives up and
    # the run ends in the simulated OOM, saying why reclaim could not help
    with pytest.raises(SimulationError) as e:
        numasim.run(EATERS, overrides={"kernel.sysctl.demotion_enabled": False})
    msg = str(e.value)
    assert "MPOL_BIND to node 0" in msg and "node 0 (2.00 GiB) is full" in msg, msg
    assert "direct reclaim could not demote: demotion_enabled is false" in msg, msg


@pytest.mark.parametrize("override, loc", [
    ({"kernel.version": "5.13", "kernel.numa_balancing": 2}, "kernel.numa_balancing"),
    ({"kernel.version": "5.19", "kernel.sysctl.numa_balancing_hot_threshold_ms": 500}, "kernel.sysctl.numa_balancing_hot_threshold_ms"),
    ({"kernel.numa_balancing": 5}, "kernel.numa_balancing"),
    ({"machine.memory_type": ["kmem", "kmem"]}, "machine.memory_type"),
    ({"machine.cpus_per_node": [0, 0]}, "machine.cpus_per_node"),
    ({"kernel.features.numa-tiering-hot-threshold": False}, "kernel.features.numa-tiering-rate-limit"),
])
def test_tiering_errors_name_the_key(override, loc):
    with pytest.raises(ScenarioError) as e:
        numasim.run(SCENARIO, overrides=override)
    assert any(err["loc"] == loc for err in e.value.errors), e.value.errors


def test_threads_cannot_run_on_a_cpu_less_node():
    with pytest.raises(ScenarioError) as e:
        numasim.run(SCENARIO, overrides={"workload.1.nodes": [1]})
    assert any("have none" in err["msg"] for err in e.value.errors), e.value.errors


def sixteen_nodes() -> str:
    """8 sockets with DRAM and 8 CPU-less kmem nodes, each one socket's CXL memory: SLIT 17
    to its own socket (as Optane PMEM on the socket), 21 between sockets, 28 beyond."""
    n = 16

    def dist(i, j):
        return 10 if i == j else 17 if i % 8 == j % 8 else 21 if i < 8 and j < 8 else 28

    def matrix(f):
        return "[" + ", ".join("[" + ", ".join(str(f(i, j)) for j in range(n)) + "]" for i in range(n)) + "]"

    return TIERED_KERNEL + f"""[machine]
profile = "intel-2s-128g"
nodes = {n}
cpus_per_node = {[4] * 8 + [0] * 8}
memory_type = {["dram"] * 8 + ["kmem"] * 8}
memory_gib_per_node = {[1] * 8 + [2] * 8}
distances = {matrix(dist)}
[machine.cost]
latency_ns = {matrix(lambda i, j: 90.0 if i == j else 140.0 if i < 8 and j < 8 else 270.0)}
node_bandwidth_gibps = {[143.0] * 8 + [30.0] * 8}
stream_gibps = {matrix(lambda i, j: 12.0 if i == j else 8.0 if j < 8 else 5.0)}
page_store_gibps = {matrix(lambda i, j: 12.0 if i == j else 8.0 if j < 8 else 5.0)}
touch_gibps = {matrix(lambda i, j: 12.0 if i == j else 8.0 if j < 8 else 5.0)}
[[workload]]
kind = "memory_eater"
size_gib = 0.8
node = 0
free_at_s = 100
[[workload]]
kind = "pmbench"
nodes = [0]
start_s = 0.5
threads = 4
set_mib = 512
pattern = "normal"
shape = 40000
duration_s = 5
""".replace("'", '"')


def test_a_16_node_machine_with_8_cpu_less_nodes_tiers_and_promotes():
    """Issue 30: more than 8 nodes (MAX_NUMNODES 64). Each socket demotes to its own CXL node
    (establish_demotion_targets: the nearest node of the next tier), and pmbench's pages that
    spilled from the full node 0 to node 8 are promoted back."""
    r = numasim.run(sixteen_nodes())
    assert r.completed and r.sim["nr_nodes"] == 16
    tiers = r.sim["memory_tiers"]
    assert tiers["toptier"] == [True] * 8 + [False] * 8
    assert tiers["demotion"] == [[i + 8] for i in range(8)] + [[]] * 8
    assert c(r, "pgpromote_success") > 1000 and c(r, "pgdemote_kswapd") > 1000
    # node 0 falls back to its own CXL node (SLIT 17) before another socket (21); promotion
    # and demotion stay between the two: no page ever lands on the other 14 nodes
    peak = r.memory.groupby("node")["pages"].max()
    assert peak[0] > 0 and peak[8] > 0
    assert peak.drop([0, 8]).sum() == 0, peak.to_dict()


def test_node_limit_is_64():
    with pytest.raises(ScenarioError) as e:
        numasim.resolve(sixteen_nodes(), overrides={"machine.nodes": 65})
    assert any("at most 64 nodes" in err["msg"] for err in e.value.errors), e.value.errors

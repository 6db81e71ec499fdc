"""Two processes sharing pages through a shared mapping (shared-processes-4k, issue 27 item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

import numasim

SCENARIO = Path(numasim.__file__).parent / "validation" / "shared-processes-4k.toml"


def run(mapping: str, processes: int, kernel: str = "7.3"):
    text = SCENARIO.read_text().replace('version = "6.12"', f'version = "{kernel}"')
    text = text.replace('mapping = "shared"', f'mapping = "{mapping}"').replace("processes = 2", f"processes = {processes}")
    return numasim.run(text.replace("duration_s = 30.0", "duration_s = 10.0"))


def workers(r):
    """The streaming threads (not a process's main thread): (tgid, numa_group, node)."""
    return [(t["tgid"], t["numa_group"], t["node"]) for t in r.raw["tasks"] if t["pid"] != t["tgid"]]


@pytest.mark.parametrize("mapping", ["shared", "shmem"])
def test_two_processes_join_one_numa_group_only_through_a_shared_mapping(mapping):
    # task_numa_group joins tasks of different processes only for a TNF_SHARED fault: a page
    # of a VM_SHARED mapping that both processes map. Their workers end in one group.
    ws = workers(run(mapping, 2))
    assert len({tgid for tgid, _, _ in ws}) == 2, ws
    groups = {g for _, g, _ in ws}
    assert len(groups) == 1 and None not in groups, ws


def test_pages_mapped_by_two_processes_flush_both():
    # Migrating a page the other process maps (accessible there) flushes that process's CPUs
    # (try_to_migrate over every mapping); one process's PROT_NONE page needs none (delayed map).
    two, one = run("shared", 2), run("private", 1)
    c2, c1 = two.counters, one.counters
    assert c1["nr_tlb_remote_flush"] < 0.01 * c1["numa_pages_migrated"]
    assert c2["nr_tlb_remote_flush"] > 0.3 * c2["numa_pages_migrated"]
    # each process's scanner protects its own PTEs of the one buffer
    assert c2["numa_pte_updates"] > 1.5 * c1["numa_pte_updates"]
    for c in (c1, c2):
        assert c["numa_pages_migrated"] <= c["numa_hint_faults"] - c["numa_hint_faults_local"]
    # the buffer is allocated once: 64 MiB plus migrations and the processes' own small pages
    assert c2["pgalloc_normal"] - c2["numa_pages_migrated"] < 16384 + 2000


@pytest.mark.parametrize("kernel, scanned", [("6.1", False), ("6.12", False), ("7.3", True)])
def test_shared_memory_is_scanned_from_the_shmem_fix_only(kernel, scanned):
    # vma_policy_mof: before "mm: mempolicy: fix automatic numa balancing for shmem" (7.2) a
    # shmem VMA without a shared policy is never scanned (the VM: 6.1.192 and 6.12.95 update
    # ~30-110 PTEs of the processes' own pages, 7.3.4 ~127,000); a private buffer always is.
    shared, private = run("shared", 2, kernel).counters, run("private", 1, kernel).counters
    assert private["numa_pages_migrated"] > 1000
    if scanned:
        assert shared["numa_pte_updates"] > 16384 and shared["numa_pages_migrated"] > 1000
    else:
        assert shared["numa_pte_updates"] < 500 and shared["numa_pages_migrated"] < 100


@pytest.mark.parametrize("keys, problem", [
    ('mapping = "shmem"\nmadvise = "hugepage"', "shmem_enabled"),
    ('mapping = "anon"', "must be"),
    ("processes = 3", "must be 1 or 2"),
])
def test_refused_combinations_say_why(keys, problem):
    text = SCENARIO.read_text().replace("processes = 2\n", "").replace('mapping = "shared"\n', "")
    text = text.replace("duration_s = 30.0\n", "duration_s = 30.0\n" + keys + "\n")
    with pytest.raises(numasim.ScenarioError, match=problem):
        numasim.run(text)


def test_a_private_buffer_after_fork_is_copied_by_the_first_store():
    # copy_page_range shares the parent's folios with the child read-only; the first store to a
    # page copies it on the storing process's node (wp_page_copy), the other process then owns the
    # old folio and reuses it. Each process ends with its own 64 MiB: 16,384 copies in all, on the
    # two nodes, and the child's reused pages on node 0 are remote for it (NUMA migrations).
    r = run("private", 2, "6.12")
    c = r.counters
    first_touch = 16384
    copies = c["pgalloc_normal"] - first_touch - c["numa_pages_migrated"]
    assert 16384 <= copies < 16384 + 200, c  # (+ the image's copies)
    numastat = r.raw["numastat"]["numa_hit"]
    assert numastat[1] > 1000 and numastat[0] > first_touch + 1000, "both processes copied pages"
    assert 1000 < c["numa_pages_migrated"] < 16384, "the child's reused node-0 pages move to node 1"
    child = [t for t in r.raw["tasks"] if t["pid"] != t["tgid"] and t["node"] == 1]
    assert child and child[0]["numa_pages_migrated"] == c["numa_pages_migrated"]


def test_the_childs_first_loads_fault_around():
    # numaw's worker loads a page before it stores to it: a read fault on a page the page cache
    # holds maps its cached 16-page window (do_fault_around), so the child maps the parent's
    # 16,384 pages with ~1,024 faults (the VM: 17,583 faults in all on 6.12, 17,453 simulated)
    c = run("shared", 2, "6.12").counters
    assert 16384 + 1024 <= c["pgfault"] < 16384 + 1024 + 1000


def test_fork_of_a_private_thp_buffer_stops_with_a_clear_error():
    # copy-on-write is modelled for base folios; a THP the child would share is refused by name
    text = SCENARIO.read_text().replace('mapping = "shared"', 'mapping = "private"').replace('enabled = "never"', 'enabled = "always"')
    with pytest.raises(numasim.SimulationError, match="large folios"):
        numasim.run(text.replace("duration_s = 30.0", "duration_s = 2.0"))

"""Acceptance direction on the real 2-node, 128-CPU profile at full numa02 scale."""

import pytest

import numasim

pytestmark = pytest.mark.slow
MACHINE = "xeon-platinum-2n-128c"


@pytest.fixture(scope="module")
def runs():
    def go(kind, on, image="glibc"):
        r = numasim.run(workload=kind, machine=MACHINE, balancing=on, seed=1,
                        overrides={"workload.image": image})
        r.check_invariants()
        return r

    return {
        "on": go("numa02", True),
        "on_bare": go("numa02", True, image="none"),
        "hard_on_bare": go("numa02_HARD_BIND", True, image="none"),
        "off": go("numa02", False),
        "hard_on": go("numa02_HARD_BIND", True),
        "hard_off": go("numa02_HARD_BIND", False),
        "inverse_off": go("numa02_INVERSE_BIND", False),
    }


def test_full_scale_numa02_shape(runs):
    r = runs["on"]
    assert r.sim["nr_cpus"] == 128 and r.sim["nr_nodes"] == 2
    assert r.scenario["workloads"][0]["threads"] == 128
    assert r.completed


# The first issue's acceptance was set for numa02's buffer alone (image = "none"); with the
# program image the 128 thread stacks delay the first pass (test_thread_stacks_delay_...).
def test_on_hint_local_last_10_percent_at_least_80(runs):
    pct, faults, start = runs["on_bare"].hint_local_tail(0.1)
    assert faults > 0, "the figure must rest on real hint faults"
    assert pct >= 80, (pct, faults, start)


def test_on_elapsed_within_15_percent_of_hard_bind(runs):
    on, hard = runs["on_bare"].elapsed_s, runs["hard_on_bare"].elapsed_s
    assert abs(on - hard) / hard <= 0.15, (on, hard)


def _first_pass_end(r):
    """When mm->numa_scan_seq first reached 1 (infinity: the run ended first)."""
    sq = r.raw["series"]["scan_seq"]
    return min((t for t, seq in zip(sq["time_s"], sq["seq"]) if seq >= 1), default=float("inf"))


def test_thread_stacks_delay_the_first_pass(runs):
    """kernel/sched/fair.c: task_numa_work charges a chunk's whole range to the window's
    256 MiB budget once one PTE in it changed: each 8 MiB stack with a touched page costs
    2048 pages, so the 128 stacks below the buffer take 4 windows (32 stacks each), and the
    buffer's first pass ends later than without them."""
    glibc, bare = runs["on"], runs["on_bare"]
    assert _first_pass_end(glibc) > _first_pass_end(bare) + 1.5
    v = glibc.raw["series"]["vmstat"]
    stack_windows = [b - a for a, b in zip(v["numa_hint_faults"], v["numa_hint_faults"][1:]) if b > a][:4]
    assert stack_windows and all(d <= 32 for d in stack_windows), stack_windows
    assert glibc.elapsed_s > bare.elapsed_s


def test_on_migrates_pages(runs):
    # first touch puts all of numa02's 1 GiB on one node; balancing must move some
    assert runs["on"].counters["numa_pages_migrated"] > 0


def test_off_zero_hint_faults(runs):
    c = runs["off"].counters
    assert c["numa_hint_faults"] == 0 and c["numa_pte_updates"] == 0


def test_off_between_hard_and_inverse_bind(runs):
    e = runs["off"].elapsed_s
    assert runs["hard_off"].elapsed_s <= e <= runs["inverse_off"].elapsed_s
    assert runs["hard_off"].elapsed_s < runs["inverse_off"].elapsed_s  # remote must cost something


def test_balancing_helps_numa02(runs):
    assert runs["on"].elapsed_s < runs["off"].elapsed_s

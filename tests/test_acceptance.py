"""Acceptance direction on the real 2-node, 128-CPU profile at full numa02 scale."""

import pytest

import numasim

pytestmark = pytest.mark.slow
MACHINE = "xeon-platinum-2n-128c"


@pytest.fixture(scope="module")
def runs():
    def go(kind, on):
        r = numasim.run(workload=kind, machine=MACHINE, balancing=on, seed=1)
        r.check_invariants()
        return r

    return {
        "on": go("numa02", True),
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


def test_on_hint_local_last_10_percent_at_least_80(runs):
    pct, faults, start = runs["on"].hint_local_tail(0.1)
    assert faults > 0, "the figure must rest on real hint faults"
    assert pct >= 80, (pct, faults, start)


def test_on_elapsed_within_15_percent_of_hard_bind(runs):
    on, hard = runs["on"].elapsed_s, runs["hard_on"].elapsed_s
    assert abs(on - hard) / hard <= 0.15, (on, hard)


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

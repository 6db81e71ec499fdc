"""kvm-pinned (seed 004): the scenarios differ only in the RFC's three features, and on a small
VM the checks hold by mechanism: base wastes KVM flushes, hint faults and failed migrations on
pinned RAM; patched none; a half-pinned guest loses about half of its NUMA flushes per pass.
The full experiment (~10 s) is not run here."""

import tomllib

import pytest

from numasim import experiments
from numasim.experiments import kvm_pinned as kp
from numasim.experiments.registry import run_many

SMALL_VM = {
    "machine.cpus_per_node": 4,
    "workload.vcpus": 8,
    "workload.memory_mib": 2048,
    "workload.duration_s": 30.0,
}


def test_registered_and_only_the_patches_differ():
    exp = experiments.get("kvm-pinned")
    assert exp.columns == ["base", "patched"]
    sc = exp.scenarios()
    assert len(sc) == 2 * len(kp.GUESTS)
    for label, _, _ in kp.GUESTS:
        base, patched = (tomllib.loads(sc[label, c]) for c in ("base", "patched"))
        features = patched["kernel"].pop("features")
        assert features == {"numa-skip-pinned": True, "mmu-notifier-range-numa": True, "kvm-skip-pinned-zap": True}
        assert base == patched, "the named features are the only difference"


@pytest.fixture(scope="module")
def small_results():
    keys = [("THP pinned", "madvise", 1.0), ("THP half-pinned", "madvise", 0.5)]
    scenarios = {(label, c): kp.to_toml(kp.scenario(thp, pinned, c, SMALL_VM)) for label, thp, pinned in keys for c in kp.COLUMNS}
    out = run_many(scenarios)
    assert all(o.error is None for o in out.values()), [o.error for o in out.values()]
    return {k: o.result for k, o in out.items()}


def rows_by_metric(label, pinned, results):
    return {r.metric.split(": ", 1)[1]: r for r in kp.guest_rows(label, pinned, {c: results[label, c] for c in kp.COLUMNS})}


def test_fully_pinned_guest(small_results):
    rows = rows_by_metric("THP pinned", 1.0, small_results)
    ipis = rows["KVM shootdown IPIs from NUMA invalidations"].values
    assert ipis["base"] > 0 and ipis["patched"] == 0
    assert rows["hint faults on pinned pages"].values["base"] > 0
    assert rows["pgmigrate_fail"].values["base"] > 0
    for m in ("hint faults on pinned pages", "pgmigrate_fail", "SPTEs zapped"):
        assert rows[m].values["patched"] == 0, m
    # left: QEMU's own small memory (workload/image.rs), no guest page
    assert rows["numa_hint_faults"].values["patched"] * 100 < rows["numa_hint_faults"].values["base"]
    assert rows["hint faults on pinned pages"].ok and rows["pgmigrate_fail"].ok


def test_half_pinned_guest_loses_about_half_its_flushes_per_pass(small_results):
    rows = rows_by_metric("THP half-pinned", 0.5, small_results)
    cut = rows["fall in KVM NUMA flushes per scan pass"].values["patched"]
    assert 0.5 - kp.FRACTION_BAND <= cut <= 0.5 + kp.FRACTION_BAND, cut
    assert rows["pgmigrate_fail"].values["patched"] == 0 < rows["pgmigrate_fail"].values["base"]
    assert 0 < rows["SPTEs zapped"].values["patched"] < rows["SPTEs zapped"].values["base"]

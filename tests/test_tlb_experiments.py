"""Issue 3's experiments: base and patched differ only in named features; migrate-batch runs."""

import copy

import pytest

from numasim.experiments import get
from numasim.experiments.tlb_flush import delay_mapping_scenario, migrate_batch_scenario


@pytest.mark.parametrize("build", [delay_mapping_scenario, migrate_batch_scenario])
def test_base_and_patched_differ_only_in_features(build):
    base, patched = build("base"), build("patched")
    fb, fp = base["kernel"].pop("features"), patched["kernel"].pop("features")
    assert base == patched, "machine, workloads, sysctls and seed must be identical"
    assert fb != fp and set(fb) == set(fp)
    from numasim import features

    known = {f["name"]: f for f in features()}
    assert all(name in known and known[name]["modelled"] for name in fb)


def test_delay_mapping_follows_the_changelog_setup():
    s = delay_mapping_scenario("patched")
    eater, pm = s["workload"]
    assert (eater["size_gib"], eater["node"]) == (40.0, 1)
    assert (pm["processes"], pm["threads"], pm["set_mib"], pm["pattern"], pm["nodes"]) == (8, 8, 8960, "normal", [1])
    assert eater["free_at_s"] == pytest.approx(pm["start_s"] + 10.0), "the eater dies 10 s into pmbench"
    assert s["machine"]["profile"] == "intel-2s-128g"


@pytest.mark.slow
def test_migrate_batch_reproduces_the_direction():
    r = get("migrate-batch").run(max_workers=2)
    d = r.to_dict()
    assert d["experiment"] == "migrate-batch" and d["columns"] == ["base", "patched"]
    rows = {row["metric"]: row for row in d["rows"]}
    ipi = rows["TLB flush IPIs change (per migrated page)"]
    assert ipi["ok"] and ipi["values"]["patched"] <= -0.95 and ipi["reference"]["patched"] == -0.991
    rate = rows["pages migrated per second, patched / base"]
    assert rate["ok"], rate
    assert d["pass"]

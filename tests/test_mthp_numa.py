"""mthp-numa (seed 001): the scenarios, the checks on fake results, and the kernel rule on one
small real run (before 6.10 PTE-mapped mTHP are never scanned). The full experiment is not run
here."""

import tomllib
from types import SimpleNamespace

import pytest

import numasim
from numasim import experiments
from numasim.experiments import mthp_numa as mn
from numasim.experiments.registry import RunOutcome

from conftest import SMALL_OVERRIDES

COLUMNS = ["base", "patched"]
SIZES = ["16K", "64K", "128K"]
TESTS = ["numa01", "numa01_THREAD_ALLOC", "numa02", "numa02_SMT"]


# ---------------------------------------------------------------- scenarios


def test_registered_with_25_scenarios():
    assert "mthp-numa" in experiments.names()
    exp = experiments.get("mthp-numa")
    assert exp.columns == COLUMNS
    keys = list(exp.scenarios())
    assert len(keys) == 25
    assert set(keys) == ({(s, t, c) for s in SIZES for t in TESTS for c in COLUMNS}
                         | {("2M", "numa02", "patched")})


@pytest.mark.parametrize("key, version, thp", [
    (("64K", "numa01_THREAD_ALLOC", "base"), "6.9",
     {"enabled": "never", "sizes": {"64K": "always"}}),
    (("16K", "numa02_SMT", "patched"), "6.10", {"enabled": "never", "sizes": {"16K": "always"}}),
    (("2M", "numa02", "patched"), "6.10", {"enabled": "always"}),
])
def test_scenario_toml(key, version, thp):
    d = tomllib.loads(experiments.get("mthp-numa").scenarios()[key])
    assert d["seed"] == 1
    assert d["machine"] == {"profile": "xeon-icx-2n-128c"}
    assert d["kernel"] == {"version": version, "thp": thp}
    assert d["workload"] == [{"kind": key[1]}]


def test_scenarios_resolve():
    for key in [("128K", "numa01", "base"), ("128K", "numa01", "patched"),
                ("2M", "numa02", "patched")]:
        numasim.resolve(mn.to_toml(mn.scenario(*key)))


# ---------------------------------------------------------------- checks on fake results


def fake(elapsed_s: float, hint=0, migrated=0, pte=0, huge=0, folio_max=0):
    counters = {"numa_hint_faults": hint, "numa_pages_migrated": migrated,
                "numa_pte_updates": pte, "numa_huge_pte_updates": huge}
    return SimpleNamespace(counters=counters,
                           times={"elapsed_s": elapsed_s, "system_s": 0.0, "user_s": 0.0},
                           raw={"folio_migrations": {"folios": 1, "migrations": folio_max,
                                                     "max": folio_max}})


def changelog_results() -> dict:
    """Fake Results with the changelog's times: every ratio check passes."""
    res = {}
    for (size, test), (base, patched) in mn.REF.items():
        res[size, test, "base"] = fake(base)
        res[size, test, "patched"] = fake(patched, hint=100, migrated=400, folio_max=3)
    res["2M", "numa02", "patched"] = fake(9.0, hint=30, pte=512 * 32 + 7, huge=32)
    return res


def rows_by_metric(results) -> dict:
    outcomes = {k: RunOutcome(result=r) for k, r in results.items()}
    return {r.metric: r for r in experiments.get("mthp-numa").evaluate(outcomes)}


def test_changelog_numbers_pass():
    rows = rows_by_metric(changelog_results())
    assert all(r.ok for r in rows.values()), [r.metric for r in rows.values() if not r.ok]
    row = rows["16K numa01 elapsed_s"]
    assert row.values == {"base": 224.70, "patched": 143.48}
    assert row.reference == {"base": 224.70, "patched": 143.48}
    assert "(0.64)" in row.check and "35%" in row.check
    ratio = rows["16K numa01 patched/base"]
    assert ratio.values["patched"] == pytest.approx(143.48 / 224.70)
    assert ratio.reference == {"patched": pytest.approx(143.48 / 224.70)} and ratio.check == ""
    assert rows["16K numa01 numa_hint_faults"].values == {"base": 0, "patched": 100}
    assert rows["16K numa01 numa_pages_migrated"].values == {"base": 0, "patched": 400}
    assert rows["16K numa01 folio migrations max"].values == {"patched": 3}
    pmd = rows["2M numa02 base-page PTE updates besides 512 × numa_huge_pte_updates"]
    assert pmd.values == {"patched": 7}  # the image's base pages
    assert rows["2M numa02 hint faults ≤ PMDs + base pages protected"].values == {"patched": 30}
    checked = [r for r in rows.values() if r.check]
    assert len(checked) == 12 + 2


@pytest.mark.parametrize("patched, ok", [
    (143.48 * 1.30, True),   # ratio 1.30 x the changelog's: inside the band
    (143.48 * 0.70, True),   # 0.70 x: inside
    (143.48 * 1.40, False),  # 1.40 x: outside (and still faster than base)
    (143.48 * 0.60, False),  # 0.60 x: outside
    (224.70, False),         # patched == base
    (230.00, False),         # patched slower than base
])
def test_ratio_band(patched, ok):
    res = changelog_results()
    res["16K", "numa01", "patched"].times["elapsed_s"] = patched
    assert rows_by_metric(res)["16K numa01 elapsed_s"].ok is ok


def test_patched_not_faster_fails_even_inside_the_band():
    # a changelog ratio near 1 would admit patched >= base inside ±35%; the check still fails
    assert mn.check_ratio(10.0, 10.5, 0.9) == (False, 1.05)
    assert mn.check_ratio(10.0, 9.5, 0.9)[0] is True


def test_failed_runs_fail_their_checks():
    res = changelog_results()
    outcomes = {k: RunOutcome(result=r) for k, r in res.items()}
    outcomes["64K", "numa02", "patched"] = RunOutcome(error="SimulationError: out of memory")
    outcomes["2M", "numa02", "patched"] = RunOutcome(error="SimulationError: boom")
    rows = {r.metric: r for r in experiments.get("mthp-numa").evaluate(outcomes)}
    assert not rows["64K numa02 elapsed_s"].ok
    assert rows["64K numa02 elapsed_s"].values == {"base": 13.24, "patched": None}
    assert rows["64K numa02 patched/base"].values == {"patched": None}
    assert not rows["2M numa02 base-page PTE updates besides 512 × numa_huge_pte_updates"].ok
    assert not rows["2M numa02 hint faults ≤ PMDs + base pages protected"].ok
    assert not rows["run 64K numa02 patched failed"].ok
    assert rows["64K numa02_SMT elapsed_s"].ok


@pytest.mark.parametrize("pte, huge, hint, ok_pte, ok_hint", [
    (512 * 32, 32, 32, True, True),
    (512 * 32 + 20, 32, 52, True, True),    # the image's base pages, one hint fault each
    (512 * 32 - 1, 32, 32, False, True),    # a PMD counted with fewer than 512 pages
    (512 * 32 + 1000, 32, 32, False, True), # far more base pages than an image has
    (0, 0, 0, False, False),                # nothing scanned
    (512 * 32 + 20, 32, 53, True, False),   # more hint faults than PMDs and pages protected
])
def test_pmd_checks(pte, huge, hint, ok_pte, ok_hint):
    res = changelog_results()
    res["2M", "numa02", "patched"] = fake(9.0, hint=hint, pte=pte, huge=huge)
    rows = rows_by_metric(res)
    assert rows["2M numa02 base-page PTE updates besides 512 × numa_huge_pte_updates"].ok is ok_pte
    assert rows["2M numa02 hint faults ≤ PMDs + base pages protected"].ok is ok_hint


# ---------------------------------------------------------------- one real small run


def test_small_numa02_base_never_scans_mthp():
    """Before 6.10 PTE-mapped mTHP are never made PROT_NONE: the only hint faults are on the
    process image's base pages (workload/image.rs), a handful against the patched run's."""
    counters = {}
    for column in COLUMNS:
        r = numasim.run(mn.to_toml(mn.scenario("16K", "numa02", column, SMALL_OVERRIDES)))
        assert r.raw["mthp"]["hugepages-16kB"]["anon_fault_alloc"] > 0, column
        counters[column] = r.counters
    assert counters["base"]["numa_hint_faults"] * 100 < counters["patched"]["numa_hint_faults"]
    assert counters["base"]["numa_pte_updates"] * 100 < counters["patched"]["numa_pte_updates"]

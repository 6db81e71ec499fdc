"""tiering-hot-selection (issue 30 item 5): the four columns differ only in the series'
features (and the rate limit they bring), the shrunk machine keeps every per-page time of the
full one, and the step checks catch a wrong direction or a ratio off by more than 35%. The
experiment itself (~4 min on 2 cores) is run by `numasim reproduce tiering-hot-selection`."""

import tomllib
from types import SimpleNamespace

import pytest

import numasim
from numasim import experiments
from numasim.experiments import tiering_hot_selection as ths


def test_registered_and_only_the_series_differs():
    exp = experiments.get("tiering-hot-selection")
    assert exp.columns == ["base", "hot selection", "rate limit", "auto adjustment"]
    sc = {c: tomllib.loads(t) for c, t in exp.scenarios().items()}
    for i, c in enumerate(exp.columns):
        k = sc[c]["kernel"]
        assert (k["version"], k["numa_balancing"]) == ("5.19", 2)
        assert k.get("features", {}) == {f: True for f in ths.FEATURES[:i]}
        assert ("numa_balancing_promote_rate_limit_MBps" in k["sysctl"]) == (i >= 2)
        numasim.resolve(exp.scenarios()[c])  # a valid scenario on 5.19 with the 6.1 features
    strip = [dict(sc[c], kernel={k: v for k, v in sc[c]["kernel"].items() if k not in ("features", "sysctl")})
             for c in exp.columns]
    assert all(s == strip[0] for s in strip)


def test_the_shrunk_machine_keeps_per_page_times():
    p, full = ths.scaled(), ths.FULL
    # accesses per page per second: threads over pages
    assert p["threads"] / p["set_mib"] == pytest.approx(full["threads"] / full["set_mib"])
    assert p["memory_gib_per_node"][2] / p["memory_gib_per_node"][0] == full["pmem_gib"] / full["dram_gib"]
    dram_mib = sum(p["memory_gib_per_node"][:2]) * 1024
    assert p["set_mib"] > dram_mib > 2 * p["shape"] / 256, "the set spills to PMEM; its middle +-sigma fits DRAM"
    # time between two scans of a page (mode 2: the period stays task_scan_min, kernel/sched/fair.c)
    def pass_s(set_mib, period_min_ms, scan_mb=256):
        windows = set_mib // scan_mb
        floor_ms = 1000 * scan_mb / ths.MAX_SCAN_WINDOW_MBPS
        return windows * max(floor_ms, period_min_ms / windows) / 1000
    assert pass_s(p["set_mib"], p["scan_period_min_ms"]) == pytest.approx(pass_s(full["set_mib"], 1000))
    assert p["rate_limit_mbps"] == round(ths.RATE_LIMIT_MBPS / ths.SCALE)


def fake(aps, mb, cand=0, done=True):
    return SimpleNamespace(processes=[{"throughput_aps": aps}], times={"elapsed_s": 100.0},
                           counters={"pgpromote_success": int(mb * 1e6 * 100 / 4096), "pgpromote_candidate": cand},
                           sim={"kswapd_cpu_s": [1.0, 1.0]}, completed=done)


def rows_for(scores, mbs):
    results = {c: fake(s, m, cand=10**9) for c, s, m in zip(ths.COLUMNS, scores, mbs)}
    return {r.metric: r for r in ths.build_rows(results)}


def test_steps_pass_at_the_changelogs_ratios_and_fail_on_direction_or_band():
    ref_s = [ths.REF_SCORE[c] for c in ths.COLUMNS]
    ref_m = [ths.REF_PROMOTE[c] for c in ths.COLUMNS]
    rows = rows_for([s / 16 for s in ref_s], [m / 16 for m in ref_m])
    step = rows["pmbench score: step ratio (column / the one before)"]
    assert step.ok and step.values["hot selection"] == pytest.approx(165695601.2 / 146887704.1)
    assert rows["promote rate: step ratio (column / the one before)"].ok
    assert rows["pmbench score (accesses/s) x 16"].values["base"] == pytest.approx(ref_s[0])
    # rate limit step up instead of the changelog's -1.7%: a wrong direction
    up = ref_s[:2] + [ref_s[1] * 1.01, ref_s[3]]
    assert not rows_for(up, ref_m)["pmbench score: step ratio (column / the one before)"].ok
    # promotion cut by 40% at the hot step instead of 25%: within the direction, ratio 0.8 of it
    cut = [ref_m[0], ref_m[0] * 0.6] + ref_m[2:]
    assert rows_for(ref_s, cut)["promote rate: step ratio (column / the one before)"].ok
    # cut by 80%: 0.27 of the changelog's 0.75, outside +-35%
    cut = [ref_m[0], ref_m[0] * 0.2] + ref_m[2:]
    assert not rows_for(ref_s, cut)["promote rate: step ratio (column / the one before)"].ok


def test_more_promotions_than_candidates_is_a_bug():
    results = {c: fake(1e7, 10.0, cand=1) for c in ths.COLUMNS}
    row = {r.metric: r for r in ths.build_rows(results)}["promotions <= candidates (rate-limited columns)"]
    assert not row.ok and row.kind == "invariant"

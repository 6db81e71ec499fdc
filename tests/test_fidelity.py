"""`numasim fidelity`: the in-sample rule, the summary arithmetic, the shipped real-kernel boots
(data file, trimming, one boot simulated again) and the command's input errors. The shipped
experiments are not run here (they take minutes; their own tests run them): the changelog side
is given constructed or saved results."""

import json
import math

import pytest

from numasim import fidelity as fid
from numasim.cli import main
from numasim.experiments import registry
from numasim.experiments.registry import ExperimentResult, Row
from numasim.realkernel import bootdata
from numasim.realkernel import compare as cmpmod
from numasim.realkernel import pacing
from numasim.realkernel.kernels import KERNELS
from numasim.realkernel.validate import shipped
from numasim.scenario import UsageError

PROFILE = """name = "p1"
nodes = 2
[cost]
stream_gibps = [[1.0, 0.7], [0.7, 1.0]]
[source]
nodes = "spec: a datasheet"
stream_gibps = "derived: exp-x (its base run, 7.5 s)"
smt_share = "derived: exp-x, as fitted"
"""


# ---------------------------------------------------------------- in-sample rule


def test_derived_citation_names_its_source():
    assert fid.derived_from("derived: mthp-numa (seed 001 patched numa02_SMT)") == "mthp-numa"
    assert fid.derived_from("derived: exp-x, as fitted") == "exp-x"
    assert fid.derived_from("derived:") == ""


def test_a_constant_derived_from_x_makes_x_in_sample_and_not_y():
    derived = fid.derived_constants({"p1": PROFILE}, known=["exp-x", "exp-y"])
    assert derived == {"p1": {"stream_gibps": "exp-x", "smt_share": "exp-x"}}
    runs = [{"machine": {"profile": "p1"}}]
    assert fid.in_sample_constants("exp-x", runs, derived) == ["p1.smt_share", "p1.stream_gibps"]
    assert fid.in_sample_constants("exp-y", runs, derived) == []
    # a run that sets the constant itself does not use the derived one
    own = [{"machine": {"profile": "p1", "smt_share": 0.5, "cost": {"stream_gibps": [[2.0]]}}}]
    assert fid.in_sample_constants("exp-x", own, derived) == []
    assert fid.in_sample_constants("exp-x", [{"machine": {"profile": "other"}}], derived) == []


def test_a_derived_citation_naming_no_known_source_is_an_error():
    with pytest.raises(UsageError, match=r"p1: \[source\] stream_gibps .* names 'exp-x', which is neither"):
        fid.derived_constants({"p1": PROFILE}, known=["exp-y"])


def test_shipped_profiles_make_mthp_numa_and_vma_flags_grouping_in_sample():
    """The real profiles: xeon-icx-2n-128c and intel-4s-48c were fitted to their own
    experiments; xeon-platinum-2n-128c (autonuma-balancing) and intel-2s-128g (delay-mapping,
    migrate-batch, kvm-pinned) took constants fitted to mthp-numa, which are out-of-sample for
    their own experiments."""
    derived = fid.derived_constants()
    assert derived["xeon-icx-2n-128c"] == {"stream_gibps": "mthp-numa", "smt_share": "mthp-numa"}
    results = [ExperimentResult(n, ["a"], [Row("m", {"a": 2.0}, reference={"a": 1.0})]) for n in registry.names()]
    figures, rule = fid.changelog_figures(results, derived)
    sample = {f.source: f.sample for f in figures}
    assert sample == {"autonuma-balancing": "out", "delay-mapping": "out", "kvm-pinned": "out",
                      "migrate-batch": "out", "mthp-numa": "in", "tiering-hot-selection": "out",
                      "vma-flags-grouping": "in"}
    assert rule["mthp-numa"] == ["xeon-icx-2n-128c.smt_share", "xeon-icx-2n-128c.stream_gibps"]
    assert rule["vma-flags-grouping"] == ["intel-4s-48c.smt_share", "intel-4s-48c.stream_gibps"]


def test_a_comparison_quoted_twice_is_counted_once():
    rows = [Row("numa_pages_migrated", {"base": 1.0e7, "patched": 1.0e7}, reference={"base": 9.2e6, "patched": 9.2e6}),
            Row("pages migrated vs 9.2e6", {"patched": 1.0e7}, reference={"patched": 9.2e6}),
            Row("zero a", {"patched": 0}, reference={"patched": 0}), Row("zero b", {"patched": 0}, reference={"patched": 0})]
    figures, _ = fid.changelog_figures([ExperimentResult("delay-mapping", ["base", "patched"], rows)], {})
    assert [(f.metric, f.column, f.counted, f.reason) for f in figures] == [
        ("numa_pages_migrated", "base", True, ""), ("numa_pages_migrated", "patched", True, ""),
        ("pages migrated vs 9.2e6", "patched", False, "repeats numa_pages_migrated"),
        ("zero a", "patched", False, "reference is 0"), ("zero b", "patched", False, "reference is 0")]


def test_unknown_experiment_in_results_is_an_error():
    with pytest.raises(UsageError, match="'nope' is not a shipped experiment"):
        fid.changelog_figures([ExperimentResult("nope", [], [])], {})


# ---------------------------------------------------------------- summary arithmetic


def _fig(sim, ref=100.0, sample="out", source="e", kind="changelog", metric="m"):
    return fid.Figure(kind, source, metric, "c", ref, sim, sample)


def test_summary_shares_and_median_of_abs_log2():
    figs = [_fig(x) for x in (110.0, 80.0, 190.0, 300.0, 25.0, 0.0)]  # 0: a miss, |log2| infinite
    figs += [_fig(5.0, ref=0), _fig(None, ref="n/a")]  # not counted
    figs += [_fig(100.0, sample="in", source="f")]
    s = fid.summary(figs)
    out = s["out_of_sample"]["all"]
    assert (out["figures"], out["within_25pct"], out["within_2x"], out["not_counted"]) == (6, 2, 3, 2)
    assert out["share_within_25pct"] == pytest.approx(2 / 6) and out["share_within_2x"] == pytest.approx(0.5)
    # |log2| sorted: 0.138 (1.1), 0.322 (0.8), 0.926 (1.9), 1.585 (3), 2 (0.25), inf (0): median of the middle two
    assert out["median_abs_log2"] == pytest.approx((math.log2(1.9) + math.log2(3.0)) / 2)
    assert s["in_sample"]["all"]["figures"] == 1 and s["in_sample"]["all"]["median_abs_log2"] == 0.0
    assert s["out_of_sample"]["vm"]["figures"] == 0 and s["out_of_sample"]["vm"]["median_abs_log2"] is None
    worst = s["worst_out_of_sample"]
    assert [w["simulated"] for w in worst] == [0.0, 25.0, 300.0, 190.0, 80.0]
    assert [w["source"] for w in s["worst_in_sample"]] == ["f"]
    assert worst[0]["abs_log2"] is None and worst[0]["within_2x"] is False  # infinite: null in JSON
    assert [x["source"] for x in s["by_source"]] == ["e", "f"]


def test_figure_ratio_bands_and_signs():
    assert _fig(125.0).within(0.25) and not _fig(125.1).within(0.25) and _fig(75.0).within(0.25)
    assert _fig(200.0).within(2.0) and _fig(50.0).within(2.0) and not _fig(49.9).within(2.0)
    neg = _fig(-0.9, ref=-1.0)
    assert neg.ratio == pytest.approx(0.9) and neg.within(0.25)
    flip = _fig(0.5, ref=-1.0)
    assert flip.counted and flip.log2 == math.inf and not flip.within(2.0)
    assert _fig(None).log2 == math.inf and _fig(True, ref=1.0).log2 == math.inf
    assert not _fig(3.0, ref=True).counted


def test_text_output_marks_misses_and_summarises(capsys):
    figs = [_fig(110.0), _fig(300.0, metric="far"), _fig(5.0, ref=0, metric="zero")]
    rep = fid.report(figs, {"e": []})
    text = fid.to_text(figs, rep)
    far = next(l for l in text.splitlines() if l.startswith("e ") and " far " in l)
    assert far.split()[-3:] == ["3.00", "out", ">2x"]
    zero = next(l for l in text.splitlines() if " zero " in l)
    assert zero.rstrip().endswith("reference is 0")
    assert ("fidelity: 2 out-of-sample figures (2 seed changelogs, 0 real kernels): 1/2 (50%) within ±25%, "
            "1/2 (50%) within 2x, median |log2(sim/ref)| 0.86") in text
    assert "worst 2 out-of-sample misses" in text and "e: far [c] simulated 300.000, reference 100.000 (3.00x)" in text
    assert "worst 0 in-sample" not in text and "in-sample misses" not in text


# ---------------------------------------------------------------- shipped boots


def test_shipped_boots_load_and_name_shipped_scenarios_and_known_kernels():
    boots = bootdata.load()
    assert len(boots) >= 20
    names = set(shipped())
    for b in boots:
        assert b["scenario"] in names and b["kernel"] in KERNELS
        assert b["vm_kernel"].startswith(b["kernel"] + ".")
        assert bootdata.stale(b) == [], f"{b['scenario']} {b['boot']}: the shipped scenario changed since the boot"
        # the costs were measured in the boot: no constant derived from a validation scenario
        assert fid.in_sample_constants(b["scenario"], [bootdata.scenario(b)], fid.derived_constants()) == []
    assert {b["kernel"] for b in boots} == {"6.1", "6.12", "7.3"}
    # kilobytes a boot, not a dump of the runs (a tiering boot keeps two placement samples)
    assert sum(bootdata.results_dir().joinpath(f).stat().st_size for f in {b["file"] for b in boots}) < 12_000 * len(boots)


def _write(tmp_path, data):
    p = tmp_path / "boots.json"
    p.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return p


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.pop("format"), "not a numasim boots file"),
    (lambda d: d.update(boots=[]), "no \"boots\" list"),
    (lambda d: d["boots"][0].pop("calibration"), "boot 1 lacks calibration"),
    (lambda d: d["boots"][1].update(scenario="nope-4k"), "no shipped validation scenario 'nope-4k'"),
    (lambda d: d["boots"][0].update(kernel="5.4"), "unknown kernel '5.4'"),
    (lambda d: d["boots"][0]["calibration"].pop("stream_0_0"), "has no stream_0_0"),
    (lambda d: d["boots"][0]["vm"]["times"].pop("elapsed_s"), "needs counters and times.elapsed_s"),
    (lambda d: d["boots"][0]["vm"]["series"]["vmstat"]["time_s"].pop(), "vmstat series differ in length"),
])
def test_a_malformed_boots_file_is_a_clear_error(tmp_path, mutate, needle):
    data = json.loads(sorted(bootdata.results_dir().glob("*.json"))[0].read_text())
    mutate(data)
    with pytest.raises(UsageError, match="boots.json: .*" + needle.replace("(", r"\(").replace(")", r"\)")):
        bootdata.load([_write(tmp_path, data)])
    with pytest.raises(UsageError, match="boots.json: not JSON"):
        bootdata.load([_write(tmp_path, "{")])


def test_thin_drops_only_repeats_of_repeats():
    s = {"time_s": [1, 2, 3, 4, 5, 6, 7], "a": [0, 5, 5, 5, 5, 9, 9], "b": [0, 1, 1, 1, 1, 1, 1]}
    assert bootdata.thin(s) == {"time_s": [1, 2, 3, 6, 7], "a": [0, 5, 5, 9, 9], "b": [0, 1, 1, 1, 1]}


def test_trimmed_result_gives_the_same_metrics():
    """A result cut down as the shipped boots are gives the numeric metrics compare.py and
    pacing.py compute from the whole, at any horizon (a small numa02 sampled every 5 ms: two
    scan passes, long runs of repeated samples between them)."""
    import numasim
    from conftest import SMALL_NUMA02
    from numasim.scenario import apply_overrides, load_scenario, to_toml

    d = apply_overrides(load_scenario(SMALL_NUMA02), [("run.sample_interval_ms", 5), ("workload.passes", 60)])
    full = numasim.run(to_toml(d))
    trimmed = bootdata.vm_result({"vm": bootdata.trim(full.raw)})
    times = full.raw["series"]["vmstat"]["time_s"]
    assert len(trimmed.raw["series"]["vmstat"]["time_s"]) < len(times) / 4

    def numeric(m):
        return {k: v for k, v in m.items() if isinstance(v, (int, float)) and not k.startswith(("move", "swap", "stick"))}

    assert numeric(cmpmod.metrics(trimmed)) == numeric(cmpmod.metrics(full))
    assert cmpmod.metrics(full)["scan_windows"] == 2
    for t in [*times, *(x + 0.0025 for x in times)]:
        f, k = pacing.metrics(full, t), pacing.metrics(trimmed, t)
        for name in ("scan_passes", "numa_pte_updates_per_pass", "numa_hint_faults_per_pass"):
            assert k.get(name) == f.get(name), (t, name)
    for name in ("numa_pte_updates", "numa_hint_faults"):
        assert [pacing.count_at(trimmed, name, t) for t in times] == [pacing.count_at(full, name, t) for t in times]


def test_a_tiering_boot_keeps_what_its_checks_read():
    """A memory-tiering boot (tiering-promote-4k) keeps the tiers, the scenario's tiering mode
    and the pmbench placement samples its checks read (scripts/pack-vm-boots.py compared them
    with the whole vm.json when packing), and trimming it again changes none of them."""
    boot = next(b for b in bootdata.load() if b["scenario"] == "tiering-promote-4k")
    m = cmpmod.metrics(bootdata.vm_result(boot))
    assert cmpmod.checked_metrics(m) == ["pgpromote_success", "pgdemote_kswapd", "hot_fast_share_end", "memory_tiers"]
    assert m["memory_tiers"] == "top 0 | lower 1 | demote 0>1" and 0 < m["hot_fast_share_end"] <= 1
    assert cmpmod.metrics(bootdata.vm_result({"vm": bootdata.trim(boot["vm"])})) == m


@pytest.mark.slow
def test_one_shipped_boot_simulated_again():
    """The cheapest boot (remote-toucher-4k on 6.1), simulated as validate --calibrate does:
    every checked count and time beside the VM's, out-of-sample."""
    boot = next(b for b in bootdata.load() if b["scenario"] == "remote-toucher-4k" and b["kernel"] == "6.1")
    figures, rep = fid.build(None, [boot], jobs=1)
    got = {f.metric: f for f in figures}
    assert {"numa_pte_updates_per_window", "numa_hint_faults_per_window", "numa_pages_migrated",
            "elapsed_s", "system_s"} <= set(got)
    assert all(f.kind == "vm" and f.sample == "out" and f.column == "6.1 boot 1" for f in figures)
    assert got["elapsed_s"].reference == boot["vm"]["times"]["elapsed_s"]
    assert 0.5 < got["elapsed_s"].ratio < 2.0  # a timed run of measured costs, not an equality
    assert got["numa_pages_migrated"].reference == boot["vm"]["counters"]["numa_pages_migrated"]
    assert rep["summary"]["out_of_sample"]["vm"]["figures"] == sum(f.counted for f in figures)
    assert rep["in_sample_constants"] == {"remote-toucher-4k": []}


def test_a_boot_whose_scenario_changed_is_listed_not_compared():
    boot = next(b for b in bootdata.load() if b["scenario"] == "remote-toucher-4k")
    old = json.loads(json.dumps(boot))
    old["ran"]["workload"][0]["size_mib"] = 1
    figures, rep = fid.build(None, [old], jobs=1)
    assert figures == [] and rep["stale_boots"] == [
        {"scenario": "remote-toucher-4k", "kernel": old["kernel"], "boot": old["boot"], "changed": ["workload"]}]
    assert "the shipped scenario's workload changed since the boot" in fid.to_text(figures, rep)


# ---------------------------------------------------------------- the command


def _saved(tmp_path):
    res = [ExperimentResult("autonuma-balancing", ["off", "on"],
                            [Row("elapsed", {"off": 10.0, "on": 30.0}, reference={"off": 9.0, "on": 10.0}),
                             Row("faults", {"on": 0}, reference={"on": 0})]),
           ExperimentResult("mthp-numa", ["p"], [Row("t", {"p": 7.4}, reference={"p": 7.5}, check="±10%")])]
    from numasim import reproduce_all as ra

    p = tmp_path / "all.json"
    p.write_text(ra.to_json(res))
    return p


def test_fidelity_from_saved_results_json(tmp_path, capsys):
    assert main(["fidelity", "--from", str(_saved(tmp_path)), "--only", "changelogs", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    out = d["summary"]["out_of_sample"]["all"]
    assert (out["figures"], out["within_25pct"], out["within_2x"], out["not_counted"]) == (2, 1, 1, 1)
    assert out["median_abs_log2"] == pytest.approx((math.log2(10 / 9) + math.log2(3.0)) / 2)
    assert d["summary"]["in_sample"]["all"]["figures"] == 1
    assert d["summary"]["worst_out_of_sample"][0]["metric"] == "elapsed"
    assert "delay-mapping" in d["experiments_not_included"] and d["stale_boots"] == []
    assert all(f["kind"] == "changelog" for f in d["figures"])


def test_fidelity_text_from_saved_results(tmp_path, capsys):
    assert main(["fidelity", "--from", str(_saved(tmp_path)), "--only", "changelogs"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("== seed changelogs")
    assert "mthp-numa: xeon-icx-2n-128c.smt_share, xeon-icx-2n-128c.stream_gibps" in out
    assert "not included: delay-mapping" in out
    assert "fidelity: 2 out-of-sample figures (2 seed changelogs, 0 real kernels): 1/2 (50%) within ±25%" in out
    assert "worst 1 in-sample misses (by |log2(sim/ref)|):\n  mthp-numa: t [p] simulated 7.400, reference 7.500 (0.99x)" in out


@pytest.mark.parametrize("content, needle", [
    ("{", "not JSON"),
    ('{"experiments": []}', "no experiments"),
    ('{"experiments": [{"experiment": "x"}]}', "experiment 1 is not an experiment's result"),
    ('{"experiments": [{"experiment": "nope", "rows": []}]}', "'nope' is not a shipped experiment"),
    ('{"experiments": [{"experiment": "kvm-pinned", "rows": [{"metric": 1}]}]}', "kvm-pinned row 1 needs metric"),
    ('{"experiments": [{"experiment": "kvm-pinned", "rows": []}, {"experiment": "kvm-pinned x3", "rows": []}]}',
     "experiment kvm-pinned x3 is also in"),
])
def test_fidelity_from_a_bad_file_exits_2(tmp_path, capsys, content, needle):
    p = tmp_path / "bad.json"
    p.write_text(content)
    assert main(["fidelity", "--from", str(p), "--only", "changelogs"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err


def test_fidelity_from_with_only_vm_is_a_usage_error(tmp_path, capsys):
    assert main(["fidelity", "--from", str(_saved(tmp_path)), "--only", "vm"]) == 2
    assert "--from gives the changelog figures" in capsys.readouterr().err


def test_final_memory_share_per_node_is_checked_and_survives_trimming():
    """Issue 27's "final share on each node": the processes' resident pages per node at the
    last numa_maps sample up to the horizon, checked for every VM run that has samples."""
    from numasim.result import Result

    mem = {"time_s": [1.0, 1.0, 2.0, 2.0, 3.0, 3.0], "pid": [7] * 6, "node": [0, 1] * 3, "pages": [10, 0, 6, 4, 3, 7]}
    raw = {"counters": {}, "times": {"elapsed_s": 3.0}, "series": {"memory": mem, "vmstat": {"time_s": [1.0, 2.0, 3.0]}}}
    r = Result(json.dumps(raw))
    assert pacing.memory_share_end(r) == {0: 0.3, 1: 0.7}
    assert pacing.memory_share_end(r, 2.5) == {0: 0.6, 1: 0.4}  # the last sample before the horizon
    assert pacing.memory_share_end(Result(json.dumps({**raw, "series": {"vmstat": {}}}))) == {}
    m = {**cmpmod.metrics(r), **pacing.metrics(r)}
    assert {"memory_share_node0_end", "memory_share_node1_end"} <= set(cmpmod.checked_metrics(m))
    trimmed = bootdata.vm_result({"vm": bootdata.trim(raw)})
    assert pacing.memory_share_end(trimmed) == pacing.memory_share_end(r)

"""Plots (numasim.plot): what they draw, the files they write, what they skip."""

import struct
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import numasim
from conftest import SMALL_NUMA02, TIERED_MACHINE, numasim_cli
from fake_results import fake_result
from numasim import plot, storage

SERIES = {"run.placement_interval_ms": 100}

# A small tiered machine (as tests/test_tiering.py): a DRAM node with CPUs and a CPU-less kmem
# node; a memory eater fills most of the DRAM, pmbench's pages start on the kmem node, hot ones
# are promoted and kswapd demotes cold ones (0.3 s of wall time).
TIERED = TIERED_MACHINE + """[[workload]]
kind = "memory_eater"
size_gib = 1.5
node = 0
free_at_s = 12
[[workload]]
kind = "pmbench"
threads = 4
set_mib = 1536
pattern = "normal"
shape = 40000
start_s = 2.0
duration_s = 10
"""


@pytest.fixture(scope="module")
def result():
    return numasim.run(SMALL_NUMA02, overrides=SERIES)


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def tiered():
    return numasim.run(TIERED)


def test_plot_result_writes_png_and_svg_for_every_plot(tmp_path, result, tiered):
    written, skipped = plot.plot_result(result, tmp_path, "small")
    assert set(skipped) == {"tiers"} and "one memory tier" in skipped["tiers"]  # all DRAM
    assert set(written) == {"memory", "rates", "tasks", "placement"}
    for name, paths in written.items():
        assert [p.name for p in paths] == [f"small-{name}.png", f"small-{name}.svg"]
        w, h = png_size(paths[0])
        assert w > 300 and h > 200
        root = ET.parse(paths[1]).getroot()
        assert root.tag.endswith("svg")
    # a machine with two memory tiers adds the tiers plot
    written, skipped = plot.plot_result(tiered, tmp_path / "tiered", "small")
    assert skipped == {} and set(written) == {"memory", "rates", "tasks", "placement", "tiers"}
    assert [p.name for p in written["tiers"]] == ["small-tiers.png", "small-tiers.svg"]
    assert png_size(written["tiers"][0])[0] > 300


def test_memory_plot_draws_memory_per_node(result):
    fig = plot.memory_figure(result)
    m = result.memory_per_node()
    ax = fig.axes[0]
    lines = {l.get_label(): l for l in ax.get_lines()}
    assert set(lines) == {"node 0", "node 1"}
    for node in (0, 1):
        want = m[(1000, node)].to_numpy() * 4096 / (1 << 20)
        np.testing.assert_allclose(lines[f"node {node}"].get_ydata(), want)
    plot.plt.close(fig)


def test_rates_are_counter_differences_per_second(result):
    f = plot.rate_frame(result)
    vm = result.vmstat
    t = vm.index.to_numpy()
    want = np.diff(vm["numa_hint_faults"].to_numpy()) / np.diff(t)
    np.testing.assert_allclose(f["numa_hint_faults"].to_numpy(), want)
    assert (f["numa_hint_faults"] > 0).any()
    # a long series is averaged over wider windows: the same totals, fewer points
    coarse = plot.rate_frame(result, max_points=2)
    assert len(coarse) == 2
    dt = np.diff(coarse.index.to_numpy(), prepend=t[0])
    assert (coarse["numa_hint_faults"].to_numpy() * dt).sum() == pytest.approx(vm["numa_hint_faults"].iloc[-1])
    fig = plot.rates_figure({"a": result, "b": result})
    assert [ax.get_ylabel() for ax in fig.axes] == [label for _, label in plot.RATES]
    assert len(fig.axes[0].get_lines()) == 2  # one line per result
    plot.plt.close(fig)


def test_placement_heatmap_shows_the_dominant_node(result):
    fig = plot.placement_figure(result)
    grid = fig.axes[0].images[0].get_array()  # buckets x samples
    s = result.raw["series"]["placement"]
    last = max(s["time_s"])
    best = {}
    for t, b, n, p in zip(s["time_s"], s["bucket"], s["node"], s["pages"]):
        if t == last and p > best.get(b, (-1, 0))[1]:
            best[b] = (n, p)
    col = grid[:, -1]
    assert grid.shape[0] == s["buckets"]
    for b in range(s["buckets"]):
        if b in best:
            assert col[b] == best[b][0]
        else:
            assert np.ma.is_masked(col[b])  # no pages: blank
    plot.plt.close(fig)


def test_tasks_plot_rows_are_threads(result):
    fig = plot.tasks_figure(result)
    tids = set(result.raw["series"]["tasks"]["tid"])
    pref = fig.axes[0].images[0].get_array()
    cpu = fig.axes[1].images[0].get_array()
    assert pref.shape[0] == cpu.shape[0] == len(tids)
    assert set(np.unique(cpu.compressed())) <= {0, 1}
    plot.plt.close(fig)


def test_missing_series_are_skipped_with_a_reason(tmp_path):
    r = fake_result()  # no series.tasks / series.placement, like results of older engines
    written, skipped = plot.plot_result(r, tmp_path, "old")
    assert set(written) == {"memory", "rates"}
    assert "series.tasks" in skipped["tasks"] and "series.placement" in skipped["placement"]
    assert "no sim.memory_tiers" in skipped["tiers"]  # an engine before memory tiers: no crash
    short = numasim.run(SMALL_NUMA02)  # 0.25 s: shorter than the 1 s placement interval
    _, skipped = plot.plot_result(short, tmp_path, "short", formats=("png",))
    assert "empty" in skipped["tasks"]


def test_tiers_plot_draws_memory_per_tier_and_promotion_rates(tiered):
    tiers = plot.memory_tiers(tiered)
    assert [t["label"] for t in tiers] == ["tier 4 (node 0) DRAM", "tier 22 (node 1) kmem"]
    assert [t["capacity_pages"] for t in tiers] == [2 << 18, 4 << 18]
    fig = plot.tiers_figure(tiered)
    mem_ax, rate_ax = fig.axes
    assert "numa_balancing=2 (tiering)" in fig._suptitle.get_text()
    # memory: each tier's line is the sum of series.memory over its nodes (in GiB)
    m = tiered.memory
    last = m["time_s"].max()
    lines = {l.get_label().rsplit(",", 1)[0]: l for l in mem_ax.get_lines() if not l.get_label().startswith("_")}
    assert set(lines) == {t["label"] for t in tiers}
    for t in tiers:
        want = m.loc[(m["time_s"] == last) & m["node"].isin(t["nodes"]), "pages"].sum() * 4096 / (1 << 30)
        y = lines[t["label"]].get_ydata()
        assert y[-1] == pytest.approx(want) and y.max() > 0.1
        assert lines[t["label"]].get_xdata()[-1] == last
    # rates: MiB/s over each sample interval, promotions up, demotions down; integrated over
    # time they give the counters' totals
    vm = tiered.vmstat
    rates = {l.get_label().split(" (")[0]: l for l in rate_ax.get_lines() if not l.get_label().startswith("_")}
    assert {"promoted", "promotion candidates", "demoted by kswapd"} <= set(rates)
    for label, counter, sign in (("promoted", "pgpromote_success", 1), ("demoted by kswapd", "pgdemote_kswapd", -1)):
        x, y = rates[label].get_xdata(), rates[label].get_ydata()
        dt = np.diff(x, prepend=vm.index[0])
        pages = sign * (y * dt).sum() * (1 << 20) / 4096
        assert pages == pytest.approx(vm[counter].iloc[-1]) and vm[counter].iloc[-1] > 1000, counter
    assert "pgdemote_direct" not in " ".join(rates)  # all zero here: left out
    plot.plt.close(fig)


def test_tiers_before_6_1_are_the_top_tier_and_the_rest():
    # 5.18-6.0: no abstract distances; node_is_toptier (a node with CPUs) splits the machine
    r = numasim.run(TIERED, overrides={"kernel.version": "5.19"})
    assert len(set(r.sim["memory_tiers"]["adistance"])) == 1
    assert [t["label"] for t in plot.memory_tiers(r)] == ["top tier (node 0) DRAM", "lower tier (node 1) kmem"]
    plot.plt.close(plot.tiers_figure(r))


def test_tiers_plot_is_skipped_without_tiers(result):
    with pytest.raises(plot.NotApplicable, match="one memory tier"):
        plot.tiers_figure(result)
    with pytest.raises(plot.Skipped, match="no sim.memory_tiers"):
        plot.tiers_figure(fake_result())


def test_report_shows_the_tiers_plot_only_for_tiered_runs(tmp_path, result, tiered):
    from numasim.report import build_html

    storage.save_result(tiered, tmp_path / "tiered" / "iter-01.json")
    storage.save_result(result, tmp_path / "flat" / "iter-01.json")
    html = build_html(storage.load_columns([tmp_path / "tiered"]))
    assert ": tiers (seed 1)" in html
    html = build_html(storage.load_columns([tmp_path / "flat"]))
    assert ": tiers" not in html and "one memory tier" not in html  # not applicable: no note


def test_cli_plot(tmp_path, result):
    storage.save_iterations([result, result], tmp_path / "on" / "numa02")
    storage.save_result(fake_result(kind="numa01"), tmp_path / "on" / "numa01" / "iter-01.json")
    p = numasim_cli("plot", tmp_path / "on" / "numa02", tmp_path / "on", "--out", tmp_path / "img")
    assert p.returncode == 0, p.stderr
    names = sorted(x.name for x in (tmp_path / "img").iterdir())
    want = [f"numa02-{k}" for k in ("memory", "rates", "tasks", "placement")]  # one test: the group's name
    want += [f"on-NUMA02-{k}" for k in ("memory", "rates", "tasks", "placement")]  # several: + the test
    want += ["on-NUMA01-memory", "on-NUMA01-rates"]  # a fake result without tasks/placement
    assert names == sorted(f"{w}.{e}" for w in want for e in ("png", "svg"))
    assert "memory: " in p.stdout and "tasks: skipped" in p.stderr
    assert "tiers: skipped (one memory tier (nodes 0,1, DRAM)" in p.stderr  # numa02: all DRAM

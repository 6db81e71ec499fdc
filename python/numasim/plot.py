"""Plots of a result (matplotlib, Agg backend): PNG and SVG.

- ``memory``: each process's resident memory per node over time (autonuma-benchmark's
  plot), from ``Result.memory_per_node()``.
- ``rates``: NUMA hint faults/s, pages migrated/s, TLB shootdown IPIs/s and PTE updates/s,
  from the differences of the cumulative ``series.vmstat`` samples (over windows of several
  samples when there are more than 250). Several results (one per column) are overlaid.
- ``tasks``: each thread's preferred node and CPU node over time (``series.tasks``).
- ``placement``: a heatmap of which node holds each part of a process's address space
  against time (``series.placement``, 64 address ranges).
- ``tiers``: for a machine with more than one memory tier (``sim.memory_tiers``), the memory
  of all processes per tier over time, and the promotion and demotion rates (MiB/s, from
  ``pgpromote_*`` and ``pgdemote_*`` in ``series.vmstat``).
``tasks`` and ``placement`` are sampled every ``run.placement_interval_ms``; a result without
them (an older result, or the interval set to 0) skips the plot and says why, as does
``tiers`` for a result with one tier or without ``sim.memory_tiers``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PAGE_MIB = 4096 / (1 << 20)
FORMATS = ("png", "svg")
MAX_PROCESSES = 8
MAX_RATE_POINTS = 250  # longer series are averaged over wider windows

# (vmstat counter, axis label)
RATES = [
    ("numa_hint_faults", "hint faults/s"),
    ("numa_pages_migrated", "pages migrated/s"),
    ("nr_tlb_remote_flush_received", "TLB shootdown IPIs/s"),
    ("numa_pte_updates", "PTE updates/s"),
]


# (vmstat counter, legend, line style) of the tiers plot's rate panel
TIER_RATES = [
    ("pgpromote_success", "promoted (pgpromote_success)", "-"),
    ("pgpromote_candidate", "promotion candidates (pgpromote_candidate)", ":"),
    ("pgdemote_kswapd", "demoted by kswapd (pgdemote_kswapd)", "-"),
    ("pgdemote_direct", "demoted in direct reclaim (pgdemote_direct)", "--"),
]
MEMTIER_CHUNK_BITS = 7  # include/linux/memory-tiers.h: memory_tierN holds abstract distances N << 7 ..


class Skipped(Exception):
    """The result lacks the series a plot needs; ``str()`` says which."""


class NotApplicable(Skipped):
    """The plot does not apply to this result (``tiers`` of a machine with one memory tier):
    ``plot_result`` reports it as skipped, the HTML report leaves it out silently."""


def _title(result) -> str:
    from numasim.compare import test_label

    k = result.scenario.get("kernel", {})
    m = result.scenario.get("machine", {})
    machine = m.get("name") or m.get("profile") or "custom machine"
    from numasim.result import numa_balancing_label

    bal = numa_balancing_label(result.scenario)
    mark = "" if result.completed else " [INCOMPLETE: stopped at run.max_sim_s]"
    return f"{test_label(result)} on {machine}, numa_balancing={bal}, seed={result.seed}{mark}"


def _comm(result) -> dict:
    return {int(p["pid"]): p.get("comm", "?") for p in result.processes}


# ---------------------------------------------------------------- figures


def memory_figure(result):
    """One panel per process (at most 8): MiB resident on each node over time."""
    m = result.memory_per_node()
    if m.empty:
        raise Skipped("series.memory is empty")
    pids = list(dict.fromkeys(int(p) for p, _ in m.columns))
    shown = pids[:MAX_PROCESSES]
    nodes = sorted({int(n) for _, n in m.columns})
    fig, axes = plt.subplots(len(shown), 1, figsize=(8, 1.2 + 1.9 * len(shown)), sharex=True, squeeze=False)
    comm = _comm(result)
    t = m.index.to_numpy(dtype=float)
    for ax, pid in zip(axes[:, 0], shown):
        for node in nodes:
            if (pid, node) in m.columns:
                ax.plot(t, m[(pid, node)].to_numpy() * PAGE_MIB, label=f"node {node}", drawstyle="steps-post")
        ax.set_ylabel("MiB")
        ax.set_title(f"pid {pid} ({comm.get(pid, '?')})", fontsize=9, loc="left")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("simulated time (s)")
    more = f" (first {len(shown)} of {len(pids)} processes)" if len(pids) > len(shown) else ""
    fig.suptitle(f"memory per node: {_title(result)}{more}", fontsize=10)
    fig.tight_layout()
    return fig


def rate_frame(result, max_points: int | None = None, counters=None):
    """DataFrame of per-second rates (``counters``, by default the RATES counters) over each
    sample interval, indexed by the interval's end time. With ``max_points``, a long series is
    averaged over windows of several sample intervals (every k-th sample and the last), at
    most that many."""
    vm = result.vmstat
    if counters is None:
        counters = [c for c, _ in RATES]
    cols = [c for c in counters if c in vm.columns]
    if len(vm) < 2:
        raise Skipped("series.vmstat has fewer than two samples")
    if not cols:
        raise Skipped(f"series.vmstat has none of {', '.join(counters)}")
    if max_points and len(vm) - 1 > max_points:
        k = -(-(len(vm) - 1) // max_points)
        keep = list(range(0, len(vm), k))
        if keep[-1] != len(vm) - 1:
            keep.append(len(vm) - 1)
        vm = vm.iloc[keep]
    dt = vm.index.to_series().diff()
    rates = vm[cols].diff().div(dt, axis=0).iloc[1:]
    return rates


def rates_figure(results: dict):
    """``results``: {label: Result}; each is one line per panel."""
    frames = {}
    for label, r in results.items():
        frames[label] = rate_frame(r, max_points=MAX_RATE_POINTS)
    fig, axes = plt.subplots(len(RATES), 1, figsize=(8, 8), sharex=True, squeeze=False)
    for ax, (counter, ylabel) in zip(axes[:, 0], RATES):
        for label, f in frames.items():
            if counter in f.columns:
                mark = "" if results[label].completed else " (INCOMPLETE)"
                ax.plot(f.index.to_numpy(dtype=float), f[counter].to_numpy(), drawstyle="steps-pre",
                        label=label + mark)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.grid(True, alpha=0.3)
        if len(frames) > 1:
            ax.legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("simulated time (s)")
    if len(results) == 1:
        title = _title(next(iter(results.values())))
    else:
        title = ", ".join(results)
    fig.suptitle(f"rates: {title}", fontsize=10)
    fig.tight_layout()
    return fig


def _series_frame(result, name: str, need: set):
    import pandas as pd

    s = result.raw.get("series", {}).get(name)
    if s is None:
        raise Skipped(f"this result has no series.{name} (results from before the engine recorded it)")
    df = pd.DataFrame({k: v for k, v in s.items() if isinstance(v, list)})
    if df.empty:
        raise Skipped(f"series.{name} is empty (run.placement_interval_ms = 0, or a run shorter "
                      "than one placement interval)")
    if not need <= set(df.columns):
        raise Skipped(f"series.{name} lacks columns {sorted(need - set(df.columns))}")
    return df


def _node_cmap(nodes: int):
    from matplotlib.colors import BoundaryNorm, ListedColormap

    base = plt.get_cmap("tab10").colors
    cmap = ListedColormap([base[i % len(base)] for i in range(max(1, nodes))]).with_extremes(bad="#f0f0f0")
    return cmap, BoundaryNorm([i - 0.5 for i in range(max(1, nodes) + 1)], cmap.N)


def _nr_nodes(result, *frames) -> int:
    n = result.sim.get("nr_nodes")
    if n:
        return int(n)
    return 1 + max(int(f.max()) for f in frames)


def tasks_figure(result):
    """Each thread's preferred node and CPU node over time (``series.tasks``: time_s, tid,
    pid, cpu_node, preferred_nid with -1 for none), one row per thread, colour = node."""
    import numpy as np

    df = _series_frame(result, "tasks", {"time_s", "tid", "pid", "cpu_node", "preferred_nid"})
    times = np.sort(df["time_s"].unique())
    tids = sorted(df["tid"].unique(), key=lambda t: (int(df.loc[df["tid"] == t, "pid"].iloc[0]), int(t)))
    nodes = _nr_nodes(result, df["cpu_node"], df["preferred_nid"])
    cmap, norm = _node_cmap(nodes)
    fig, axes = plt.subplots(1, 2, figsize=(10, 1.8 + min(6.0, 0.05 * len(tids) + 1.5)), sharey=True,
                             layout="constrained")
    dt = float(np.median(np.diff(times))) if len(times) > 1 else 1.0
    ext = [times[0] - dt / 2, times[-1] + dt / 2, len(tids) - 0.5, -0.5]
    for ax, col, name in ((axes[0], "preferred_nid", "preferred node"), (axes[1], "cpu_node", "CPU node")):
        grid = df.pivot_table(index="tid", columns="time_s", values=col, aggfunc="last")
        grid = grid.reindex(index=tids, columns=times).to_numpy(dtype=float)
        grid = np.ma.masked_where(np.isnan(grid) | (grid < 0), grid)
        im = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap=cmap, norm=norm, extent=ext)
        ax.set_title(name + (" (grey: none)" if col == "preferred_nid" else ""), fontsize=9)
        ax.set_xlabel("simulated time (s)")
    axes[0].set_ylabel(f"thread ({len(tids)}, by pid then tid)")
    fig.colorbar(im, ax=list(axes), label="node", ticks=range(nodes))
    fig.suptitle(f"tasks: {_title(result)}", fontsize=10)
    return fig


def placement_figure(result):
    """Heatmap of page placement (``series.placement``: each process's mapped pages cut into
    ``buckets`` equal address ranges; pages per (time_s, pid, bucket, node)): colour = the node
    holding most of the range's pages, one panel per process (at most 4)."""
    import numpy as np

    df = _series_frame(result, "placement", {"time_s", "pid", "bucket", "node", "pages"})
    buckets = int(result.raw["series"]["placement"].get("buckets") or (int(df["bucket"].max()) + 1))
    times = np.sort(df["time_s"].unique())
    pids = list(dict.fromkeys(int(p) for p in df["pid"]))[:4]
    nodes = _nr_nodes(result, df["node"])
    cmap, norm = _node_cmap(nodes)
    fig, axes = plt.subplots(len(pids), 1, figsize=(8, 1.2 + 2.6 * len(pids)), sharex=True, squeeze=False,
                             layout="constrained")
    comm = _comm(result)
    dt = float(np.median(np.diff(times))) if len(times) > 1 else 1.0
    for ax, pid in zip(axes[:, 0], pids):
        d = df[df["pid"] == pid]
        # the dominant node of each (time, bucket)
        top = d.sort_values("pages").groupby(["time_s", "bucket"])["node"].last()
        grid = np.full((buckets, len(times)), np.nan)
        ti = {t: i for i, t in enumerate(times)}
        for (t, b), n in top.items():
            grid[int(b), ti[t]] = n
        im = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", origin="lower", interpolation="nearest",
                       cmap=cmap, norm=norm, extent=[times[0] - dt / 2, times[-1] + dt / 2, -0.5, buckets - 0.5])
        ax.set_ylabel(f"address range\n(1/{buckets} of mapped)", fontsize=8)
        ax.set_title(f"pid {pid} ({comm.get(pid, '?')})", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("simulated time (s)")
    fig.colorbar(im, ax=list(axes[:, 0]), label="node holding most pages", ticks=range(nodes))
    fig.suptitle(f"page placement: {_title(result)}", fontsize=10)
    return fig


def memory_tiers(result) -> list:
    """The result's memory tiers, fastest first: a list of dicts with ``tier`` (memory_tierN's
    N: the abstract distance >> 7; None for 5.15-6.0, which split the nodes by node_is_toptier
    only), ``nodes``, ``toptier`` (node_is_toptier), ``memory_type`` (``DRAM``, ``kmem``),
    ``label`` and ``capacity_pages``. Raises Skipped without ``sim.memory_tiers`` (results of
    older engines)."""
    mt = result.sim.get("memory_tiers")
    if not mt or not mt.get("adistance"):
        raise Skipped("this result has no sim.memory_tiers (results from before the engine "
                      "recorded memory tiers)")
    adist = [int(a) for a in mt["adistance"]]
    top = [bool(t) for t in mt.get("toptier") or [True] * len(adist)]
    # 5.15-6.0: every node has the DRAM distance and only node_is_toptier (a node with CPUs)
    # separates the top tier from the nodes it demotes to
    flat = len(set(adist)) == 1 and not all(top)
    groups: dict = {}
    for node, (a, t) in enumerate(zip(adist, top)):
        key = (not t, 0) if flat else (a >> MEMTIER_CHUNK_BITS, not t)
        groups.setdefault(key, []).append(node)
    machine = result.scenario.get("machine", {})
    types = machine.get("memory_type") or ["dram"] * len(adist)  # left out when all DRAM
    node_pages = (machine.get("topology") or {}).get("node_pages") or []
    tiers = []
    for key in sorted(groups):
        nodes = groups[key]
        kinds = sorted({str(types[n]) for n in nodes if n < len(types)})
        kind = "/".join(k.upper() if k == "dram" else k for k in kinds)
        where = f"node{'s' if len(nodes) > 1 else ''} {','.join(map(str, nodes))}"
        if flat:
            name = "top tier" if top[nodes[0]] else "lower tier"
        else:
            name = f"tier {adist[nodes[0]] >> MEMTIER_CHUNK_BITS}"
        tiers.append({
            "tier": None if flat else adist[nodes[0]] >> MEMTIER_CHUNK_BITS,
            "nodes": nodes,
            "toptier": top[nodes[0]],
            "memory_type": kind,
            "label": f"{name} ({where})" + (f" {kind}" if kind else ""),
            "capacity_pages": sum(int(node_pages[n]) for n in nodes) if len(node_pages) == len(adist)
            else None,
        })
    return tiers


def tier_memory_frame(result, tiers=None):
    """Rows: time_s; one column per tier (its label): resident pages of all processes on the
    tier's nodes, from ``series.memory``."""
    tiers = tiers if tiers is not None else memory_tiers(result)
    m = result.memory
    if m.empty:
        raise Skipped("series.memory is empty")
    per_node = m.pivot_table(index="time_s", columns="node", values="pages", aggfunc="sum", fill_value=0)
    nodes = sorted({n for t in tiers for n in t["nodes"]} | {int(n) for n in per_node.columns})
    per_node = per_node.reindex(columns=nodes, fill_value=0)
    import pandas as pd

    return pd.DataFrame({t["label"]: per_node[t["nodes"]].sum(axis=1) for t in tiers}, index=per_node.index)


def tiers_figure(result):
    """Two panels for a machine with more than one memory tier: each tier's resident GiB (all
    processes) over time, with its capacity; promotion (up) and demotion (down) rates in
    MiB/s, from the differences of the cumulative pgpromote_* and pgdemote_* counters."""
    import textwrap

    tiers = memory_tiers(result)
    if len(tiers) < 2:
        t = tiers[0]
        what = ", ".join(x for x in (f"nodes {','.join(map(str, t['nodes']))}", t["memory_type"]) if x)
        raise NotApplicable(f"one memory tier ({what}): nothing is promoted or demoted")
    mem = tier_memory_frame(result, tiers)
    rates = rate_frame(result, max_points=MAX_RATE_POINTS, counters=[c for c, _, _ in TIER_RATES])
    fig, axes = plt.subplots(2, 1, figsize=(9, 7.5), sharex=True, squeeze=False)
    colors = plt.get_cmap("tab10").colors
    gib = 4096 / (1 << 30)

    ax = axes[0, 0]
    t = mem.index.to_numpy(dtype=float)
    top = max(float(mem.to_numpy().max()) * gib, 1e-3) * 1.2
    for i, tier in enumerate(tiers):
        c = colors[i % len(colors)]
        cap = tier["capacity_pages"] * gib if tier["capacity_pages"] else None
        label = tier["label"] + (f", {cap:.4g} GiB" if cap else "")
        ax.plot(t, mem[tier["label"]].to_numpy() * gib, color=c, drawstyle="steps-post", label=label)
        if cap and cap <= top * 1.1:  # a much larger capacity would squash the lines
            ax.axhline(cap, color=c, linestyle="--", linewidth=0.8, alpha=0.7)
            top = max(top, cap * 1.05)
    ax.set_ylim(0, top)
    ax.set_ylabel("GiB resident (all processes)", fontsize=9)
    ax.set_title("memory per tier (dashed: a tier's capacity, where in range)", fontsize=9, loc="left")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")

    ax = axes[1, 0]
    mib = 4096 / (1 << 20)
    rt = rates.index.to_numpy(dtype=float)
    peak = 0.0
    for counter, label, style in TIER_RATES:
        if counter not in rates.columns:
            continue
        y = rates[counter].to_numpy() * mib
        if counter == "pgdemote_direct" and not y.any():
            continue  # direct demotion is rare: no empty legend entry
        up = counter.startswith("pgpromote")
        peak = max(peak, float(y.max()) if len(y) and up else 0.0)
        ax.plot(rt, y if up else -y, drawstyle="steps-pre", linestyle=style,
                color=colors[2] if up else colors[3], linewidth=1.0 if style == ":" else 1.4, label=label)
    limit = (result.scenario.get("kernel", {}).get("tiering") or {}).get("promote_rate_limit_mbps")
    if limit and 0 < limit <= 1.5 * max(peak, 1.0):
        ax.axhline(limit, color="grey", linestyle="-.", linewidth=0.8,
                   label=f"promote rate limit ({limit} MB/s)")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_ylabel("MiB/s (promotion > 0, demotion < 0)", fontsize=9)
    ax.set_title("promotion and demotion", fontsize=9, loc="left")
    ax.grid(True, alpha=0.3)
    if ax.get_lines():
        ax.legend(fontsize=8, loc="best")
    axes[-1, 0].set_xlabel("simulated time (s)")
    fig.suptitle(textwrap.fill(f"memory tiers: {_title(result)}", 110), fontsize=10)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- files

PLOTS = {
    "memory": memory_figure,
    "rates": lambda r: rates_figure({"": r}),
    "tasks": tasks_figure,
    "placement": placement_figure,
    "tiers": tiers_figure,
}


def save_figure(fig, out_dir, name: str, formats=FORMATS) -> list:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        p = out_dir / f"{name}.{fmt}"
        fig.savefig(p, format=fmt, dpi=100)
        paths.append(p)
    plt.close(fig)
    return paths


def plot_result(result, out_dir, name: str, formats=FORMATS) -> tuple:
    """Write every plot of ``result`` as ``out_dir/name-<plot>.<fmt>``.
    Returns ({plot: [paths]}, {plot: reason skipped})."""
    written, skipped = {}, {}
    for plot, make in PLOTS.items():
        try:
            fig = make(result)
        except Skipped as exc:
            skipped[plot] = str(exc)
            continue
        written[plot] = save_figure(fig, out_dir, f"{name}-{plot}", formats)
    return written, skipped

"""`numasim sweep plot`: a metric of a sweep dataset against one axis, a line per value of
another (`--hue`), or a heatmap over two axes (`--y AXIS`, colour `--z METRIC`). Rows that
share the plotted axis values (other axes, seeds) are averaged; lines show their min-max."""

from __future__ import annotations

from pathlib import Path

from numasim.scenario import UsageError


def matches(name: str, pool: list) -> list:
    """The columns of ``pool`` that ``name`` names: itself, or a unique end of it after a `.`
    or `_` (`scan_delay_ms` for kernel.sysctl.numa_balancing_scan_delay_ms)."""
    if name in pool:
        return [name]
    return [c for c in pool if c.endswith(("." + name, "_" + name))]


def column(df, axes: list, name: str, option: str) -> str:
    """The axis (``option`` --x, --hue, --y of a heatmap) or metric (--y, --z) ``name`` names."""
    what = "axis" if option in ("--x", "--hue", "--y axis") else "metric"
    pool = axes if what == "axis" else [c for c in df.columns if c not in axes and df[c].dtype.kind in "biuf"]
    hits = matches(name, pool)
    if len(hits) == 1:
        return hits[0]
    listing = ", ".join(hits or pool) if what == "axis" else ", ".join(hits) or "elapsed_s, system_s, user_s, a counter, ..."
    why = "names several" if hits else "names none"
    raise UsageError(f"{option.split()[0]} {name}: {why} of the dataset's {'axes' if what == 'axis' else 'metrics'} "
                     f"({listing})")


def _numeric(values) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def lines_figure(df, x: str, y: str, hue: str | None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = list(dict.fromkeys(df[x]))
    numeric = _numeric(xs)
    pos = {v: (v if numeric else i) for i, v in enumerate(xs)}
    for h, part in (df.groupby(hue, sort=False) if hue else [(None, df)]):
        g = part.groupby(x, sort=False)[y].agg(["mean", "min", "max"])
        g = g.loc[[v for v in xs if v in g.index]]
        px = [pos[v] for v in g.index]
        ax.plot(px, g["mean"], marker="o", label=f"{_short(hue)}={h}" if hue else None)
        if (g["max"] > g["min"]).any():
            ax.fill_between(px, g["min"], g["max"], alpha=0.2)
    if numeric and min(xs) > 0 and max(xs) / min(xs) >= 20:
        ax.set_xscale("log")
    if not numeric:
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_xlabel(_short(x))
    ax.set_ylabel(y)
    if hue:
        ax.legend()
    ax.grid(alpha=0.3)
    return fig


def heatmap_figure(df, x: str, y: str, z: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = df.groupby([y, x], sort=False)[z].mean().unstack(x)
    grid = grid.loc[list(dict.fromkeys(df[y])), list(dict.fromkeys(df[x]))]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    im = ax.imshow(grid.to_numpy(dtype=float), aspect="auto", origin="lower", cmap="viridis")
    ax.set_xticks(range(grid.shape[1]), [str(v) for v in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(v) for v in grid.index])
    values = grid.to_numpy(dtype=float)
    mid = (np.nanmin(values) + np.nanmax(values)) / 2
    for (i, j), v in np.ndenumerate(values):  # dark text on the bright (high) cells
        ax.text(j, i, f"{v:.3g}", ha="center", va="center", color="k" if v > mid else "w", fontsize=8)
    ax.set_xlabel(_short(x))
    ax.set_ylabel(_short(y))
    fig.colorbar(im, ax=ax, label=z)
    return fig


def plot_dataset(dataset, out, x: str, y: str | None = None, hue: str | None = None, z: str | None = None,
                 allow_incomplete: bool = False) -> Path:
    """Draw the plot into ``out`` (its suffix picks the format) and return it."""
    from numasim import sweep_data

    df = sweep_data.read(dataset)
    axes = [a for a in sweep_data.axes_of(dataset) if a in df.columns]
    x = column(df, axes, x, "--x")
    heat = y is not None and len(matches(y, axes)) == 1  # --y AXIS: a heatmap
    incomplete = int((~df["completed"]).sum())
    if incomplete and not allow_incomplete:
        raise UsageError(f"{dataset}: {incomplete} points stopped at run.max_sim_s before their workloads finished "
                         "(completed = false); --allow-incomplete draws them anyway (the title says so)")
    if heat:
        y = column(df, axes, y, "--y axis")
        z = column(df, axes, z or "elapsed_s", "--z")
        if y == x:
            raise UsageError("--x and --y name the same axis")
        fig = heatmap_figure(df, x, y, z)
        what = f"{z} (mean)"
    else:
        if z is not None:
            raise UsageError("--z colours a heatmap: give --y an axis")
        y = column(df, axes, y or "elapsed_s", "--y")
        hue = column(df, axes, hue, "--hue") if hue else None
        if hue == x:
            raise UsageError("--x and --hue name the same axis")
        fig = lines_figure(df, x, y, hue)
        what = y
    title = f"{Path(dataset).name}: {what}, {len(df)} runs"
    if incomplete:
        title += f" ({incomplete} INCOMPLETE: stopped at run.max_sim_s)"
    fig.axes[0].set_title(title, fontsize=10)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return out

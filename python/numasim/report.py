"""One self-contained HTML page: the mmtests-style comparison tables, the plots (PNG
embedded as base64 data URIs) and the scenario each column was run from."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import numasim
from numasim import plot
from numasim.compare import compare, test_label

PAGE = "index.html"

CSS = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table.mmtests { border-collapse: collapse; margin: 1em 0; font-family: monospace; font-size: 0.85em; }
table.mmtests caption { text-align: left; font-weight: bold; padding: 0.3em 0; white-space: nowrap; }
table.mmtests th, table.mmtests td { padding: 0.1em 0.6em; border-bottom: 1px solid #eee; }
table.mmtests th { text-align: left; font-weight: normal; }
table.mmtests thead th { font-weight: bold; text-align: right; }
td.num, td.pct { text-align: right; white-space: pre; }
td.sig { font-weight: bold; color: #a00; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.note { color: #666; font-size: 0.9em; }
.incomplete { color: #a00; font-weight: bold; }
"""


def _png_data_uri(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plot.plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(fig, caption: str) -> str:
    return (f'<figure><img src="{_png_data_uri(fig)}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _first_per_test(column) -> dict:
    """{test label: first result of that test} in the column."""
    out = {}
    for r in column.results:
        out.setdefault(test_label(r), r)
    return out


def _scenario_block(column) -> str:
    if column.scenario_text is not None:
        return f"<p>scenario.toml of the group:</p><pre>{html.escape(column.scenario_text)}</pre>"
    blocks = []
    seen = set()
    for r, src in zip(column.results, column.sources or [None] * len(column.results)):
        label = test_label(r)
        if label in seen:
            continue
        seen.add(label)
        text = json.dumps(r.scenario, indent=1, sort_keys=True)
        where = f" (from {html.escape(str(src))}, seed {r.seed})" if src else ""
        blocks.append(f"<p>{html.escape(label)}: the resolved scenario{where}:</p><pre>{html.escape(text)}</pre>")
    return "".join(blocks)


def build_html(columns: list, baseline: str | None = None, title: str | None = None, ddof: int = 1) -> str:
    """The report page for ``columns`` (list of compare.Column)."""
    cmp = compare(columns, baseline=baseline, ddof=ddof)
    cols = cmp.columns
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title or 'numasim report')}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title or 'numasim report')}</h1>",
        '<p class="note">numasim ' + html.escape(numasim.__version__) + ". Columns: "
        + ", ".join(f"<b>{html.escape(c.name)}</b> ({len(c.results)} run{'s' if len(c.results) != 1 else ''}"
                    + (f", {c.incomplete()} INCOMPLETE" if c.incomplete() else "") + ")"
                    for c in cols)
        + f". Baseline: <b>{html.escape(cols[0].name)}</b>. Percentages follow mmtests: "
        "100 − new×100/base for lower-is-better rows (times, Stddev, CoeffVar), new×100/base − 100 "
        "for higher-is-better rows; <b>*x%*</b> marks a mean that differs from the baseline by more "
        "than the two 95% intervals (±1.96 stddev each).</p>",
        '<h2 id="tables">Comparison</h2>',
        cmp.to_html(),
        f"<details><summary>as text</summary><pre>{html.escape(cmp.to_text())}</pre></details>",
        '<h2 id="plots">Plots</h2>',
    ]
    skipped: dict = {}
    tests = []
    for c in cols:
        for t in _first_per_test(c):
            if t not in tests:
                tests.append(t)
    for t in tests:
        firsts = {c.name: _first_per_test(c).get(t) for c in cols}
        firsts = {k: v for k, v in firsts.items() if v is not None}
        parts.append(f"<h3>{html.escape(t)}</h3>")
        try:
            parts.append(_figure(plot.rates_figure(firsts),
                                 f"{t}: rates per second (first run of each column)"))
        except plot.Skipped as exc:
            skipped.setdefault("rates", str(exc))
        for name, r in firsts.items():
            for kind, make in (("memory", plot.memory_figure), ("tasks", plot.tasks_figure),
                               ("placement", plot.placement_figure)):
                try:
                    parts.append(_figure(make(r), f"{t}, {name}: {kind} (seed {r.seed})"))
                except plot.Skipped as exc:
                    skipped.setdefault(kind, str(exc))
    if skipped:
        parts.append('<p class="note">Not shown: '
                     + "; ".join(f"{html.escape(k)}: {html.escape(v)}" for k, v in skipped.items())
                     + ".</p>")
    parts.append('<h2 id="scenarios">Scenarios</h2>')
    for c in cols:
        parts.append(f"<h3>{html.escape(c.name)}</h3>{_scenario_block(c)}")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(columns: list, out_dir, baseline: str | None = None, title: str | None = None,
                 ddof: int = 1) -> Path:
    """Write ``out_dir/index.html`` and return its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    page = out / PAGE
    page.write_text(build_html(columns, baseline=baseline, title=title, ddof=ddof), encoding="utf-8")
    return page

"""One self-contained HTML page: the mmtests-style comparison tables (improvements and
regressions in different colours), the plots (PNG embedded as base64 data URIs), what differs
between the columns' scenarios and each column's scenario as TOML."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import numasim
from numasim import plot
from numasim.compare import compare, test_label
from numasim.scenario_show import resolved_toml

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
td.better { color: #060; } td.worse { color: #b00; } td.sig { font-weight: bold; }
table.diff { border-collapse: collapse; font-family: monospace; font-size: 0.85em; }
table.diff th, table.diff td { padding: 0.1em 0.6em; border-bottom: 1px solid #eee; text-align: left; }
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


def _scenario_toml(column) -> tuple:
    """(what, TOML) of a column's scenario: the group's scenario.toml, or the first run's
    resolved scenario written as scenario TOML."""
    if column.scenario_text is not None:
        return "scenario.toml of the group", column.scenario_text
    r = column.results[0]
    src = f" ({column.sources[0]}, seed {r.seed})" if column.sources else ""
    try:
        return f"the resolved scenario of its first run{src}", resolved_toml(r.scenario)
    except (KeyError, TypeError, ValueError):  # a result of an older engine: its JSON as is
        return f"the scenario of its first run{src}, as JSON", json.dumps(r.scenario, indent=1, sort_keys=True)


def _flatten(v, prefix: str = "") -> dict:
    """{dotted key: scalar or list} of a nested dict (lists of tables get their index)."""
    out = {}
    if isinstance(v, dict):
        for k, x in v.items():
            out.update(_flatten(x, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
        for i, x in enumerate(v):
            out.update(_flatten(x, f"{prefix}[{i}]"))
    else:
        out[prefix] = v
    return out


def scenario_differences(columns: list) -> dict:
    """{test: [(key, [value per column])]}: the resolved-scenario keys whose values differ
    between the columns' first runs of each test (the seed left out: iterations vary it)."""
    out = {}
    firsts = [_first_per_test(c) for c in columns]
    for t in dict.fromkeys(t for f in firsts for t in f):
        flat = [_flatten(f[t].scenario) if t in f else {} for f in firsts]
        keys = list(dict.fromkeys(k for fl in flat for k in fl))
        rows = [(k, [fl.get(k) for fl in flat]) for k in keys
                if k != "seed" and len({json.dumps(fl.get(k), sort_keys=True) for fl in flat}) > 1]
        out[t] = rows
    return out


def _differences_html(columns: list) -> str:
    if len(columns) < 2:
        return ""
    parts = []
    head = "".join(f"<th>{html.escape(c.name)}</th>" for c in columns)
    for t, rows in scenario_differences(columns).items():
        if not rows:
            parts.append(f"<p>{html.escape(t)}: the columns ran the same scenario (seeds aside).</p>")
            continue
        body = "".join("<tr><td>" + html.escape(k) + "</td>"
                       + "".join(f"<td>{html.escape(_short(v))}</td>" for v in vals) + "</tr>" for k, vals in rows)
        parts.append(f'<p>{html.escape(t)}: what differs between the columns</p>'
                     f'<table class="diff"><thead><tr><th>key</th>{head}</tr></thead><tbody>{body}</tbody></table>')
    return "".join(parts)


def _short(v) -> str:
    text = "-" if v is None else json.dumps(v)
    return text if len(text) <= 80 else text[:77] + "..."


def build_html(columns: list, baseline: str | None = None, title: str | None = None, ddof: int = 1,
               allow_mismatch: bool = False) -> str:
    """The report page for ``columns`` (list of compare.Column)."""
    cmp = compare(columns, baseline=baseline, ddof=ddof, allow_mismatch=allow_mismatch)
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
                               ("placement", plot.placement_figure), ("tiers", plot.tiers_figure)):
                try:
                    parts.append(_figure(make(r), f"{t}, {name}: {kind} (seed {r.seed})"))
                except plot.NotApplicable:
                    pass  # tiers of a one-tier machine: nothing missing, nothing to say
                except plot.Skipped as exc:
                    skipped.setdefault(kind, str(exc))
    if skipped:
        parts.append('<p class="note">Not shown: '
                     + "; ".join(f"{html.escape(k)}: {html.escape(v)}" for k, v in skipped.items())
                     + ".</p>")
    parts.append('<h2 id="scenarios">Scenarios</h2>')
    parts.append(_differences_html(cols))
    for c in cols:
        what, text = _scenario_toml(c)
        parts.append(f"<h3>{html.escape(c.name)}</h3><details><summary>{html.escape(what)}</summary>"
                     f"<pre>{html.escape(text)}</pre></details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(columns: list, out_dir, baseline: str | None = None, title: str | None = None,
                 ddof: int = 1, allow_mismatch: bool = False) -> Path:
    """Write ``out_dir/index.html`` and return its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    page = out / PAGE
    page.write_text(build_html(columns, baseline=baseline, title=title, ddof=ddof, allow_mismatch=allow_mismatch),
                    encoding="utf-8")
    return page

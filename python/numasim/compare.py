"""mmtests-style comparison of result groups (compare-kernels layout).

A *column* is one configuration: one saved result, or a group of iterations of it
(a directory). For every metric it gets the summary rows of mmtests'
``SummariseMultiops`` (Min, Amean, Stddev, CoeffVar, Max, BAmean-50/95/99; Hmean
and BHmean for higher-is-better metrics), each with the percentage column against
the baseline and, on the mean row, mmtests' significance marker. Then come the
``Duration`` rows and the vmstat rows, computed with mmtests' formulas
(``bin/lib/MMTests/Stat.pm``, ``MonitorDuration.pm``, ``MonitorMmtestsvmstat.pm``;
reference/workloads.md §2.3-§2.6):

- percentage, lower is better (times; and Stddev/CoeffVar always): ``100 - new*100/base``
- percentage, higher is better: ``new*100/base - 100``
- significance (mean row only): ``|new - base| > 1.96*(stddev_new + stddev_base)``
- vmstat rows are deltas over the whole benchmark: the sum over every run of the column
- ``AutoNUMA cost = (7*numa_pte_updates + 5000*numa_hint_faults + 19*numa_pages_migrated) / 1e6``
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

LOWER = "lower"  # lower is better (times)
HIGHER = "higher"  # higher is better (throughput)

# qnorm(0.975): the half-width of mmtests' 95% interval, in standard deviations
Z95 = 1.959963984540054
BEST_PERCENTS = (50, 95, 99)
HPAGE_PMD_NR = 512

# ---------------------------------------------------------------- statistics


def amean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else math.nan


def hmean(xs) -> float:
    """Harmonic mean; mmtests returns -1 when a sample is not positive."""
    xs = list(xs)
    if not xs:
        return math.nan
    if any(x <= 0 for x in xs):
        return -1.0
    return len(xs) / sum(1.0 / x for x in xs)


def stddev(xs, ddof: int = 1) -> float:
    """Standard deviation with ``ddof`` (1: sample, as current mmtests; 0: population,
    as the 2015 reports, whose Stddev rows match sqrt(sum((x-mean)^2)/n)). NaN for n <= ddof."""
    xs = list(xs)
    n = len(xs)
    if n - ddof <= 0 or n < 2:
        return math.nan
    if min(xs) == max(xs):
        # exactly 0: the rounded mean of equal samples can differ from them in the last bit
        return 0.0
    m = amean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (n - ddof))


def coeffvar(xs, ddof: int = 1) -> float:
    """100 * stddev / mean (0 when either is undefined or zero, as mmtests)."""
    sd, m = stddev(xs, ddof), amean(xs)
    if math.isnan(sd):
        sd = 0.0
    if math.isnan(m) or m == 0:
        return 0.0
    return 100.0 * sd / m


def best(xs, percent: int, better: str = LOWER) -> list:
    """The best ``percent``% of the samples: ``int(n*percent/100)`` of them, at least one
    (mmtests' select_lowest / select_highest)."""
    xs = sorted(xs, reverse=(better == HIGHER))
    count = max(1, int(len(xs) * percent / 100))
    return xs[:count]


def pdiff(new: float, base: float) -> float:
    """mmtests' percentage for higher-is-better data: ``new*100/base - 100``."""
    if new == base or new == 0:
        return 0.0
    if base == 0 or math.isnan(base):
        return 100.0
    return new * 100.0 / base - 100.0


def pndiff(new: float, base: float) -> float:
    """mmtests' percentage for lower-is-better data: ``100 - new*100/base``
    (positive = improvement)."""
    if new == base:
        return 0.0
    if new == 0:
        return 100.0
    if base == 0:
        return -99.0
    return 100.0 - new * 100.0 / base


def cidiff(new: float, new_sd: float, base: float, base_sd: float, z: float = Z95) -> float:
    """(new - base) over the sum of the two 95% half-widths (z * stddev, not divided by
    sqrt(n), as mmtests). With both half-widths zero (deterministic samples) mmtests returns
    the plain difference."""
    ci = z * ((0.0 if math.isnan(new_sd) else new_sd) + (0.0 if math.isnan(base_sd) else base_sd))
    diff = new - base
    return diff if ci == 0 else diff / ci


def significant(new_samples, base_samples, ddof: int = 1) -> bool:
    """mmtests' asterisks: the means differ by more than the two 95% half-widths together.
    Needs two samples on each side; with zero spread on both sides any difference counts
    (numasim's reading of mmtests' cisum == 0 case, which compares the raw difference with 1)."""
    if len(new_samples) < 2 or len(base_samples) < 2:
        return False
    new_sd, base_sd = stddev(new_samples, ddof), stddev(base_samples, ddof)
    new_m, base_m = amean(new_samples), amean(base_samples)
    if new_sd == 0 and base_sd == 0:
        return new_m != base_m
    return abs(cidiff(new_m, new_sd, base_m, base_sd)) > 1.0


# ---------------------------------------------------------------- vmstat formulas


def autonuma_cost(pte_updates, hint_faults, pages_migrated) -> float:
    """mmtests' "AutoNUMA cost", unchanged since 2012: the page-copy term
    (Cpagerw = 519 per migrated page) is dropped by a stray semicolon, and the published
    numbers are computed without it. ``pte_updates`` is the raw numa_pte_updates."""
    return (7 * pte_updates + 5000 * hint_faults + 19 * pages_migrated) / 1e6


def hint_local_percent(hint_faults, hint_local) -> float:
    """100 * local / hint faults; 100 when there were none (mmtests)."""
    return 100.0 if hint_faults == 0 else 100.0 * hint_local / hint_faults


def vmstat_rows(c: dict) -> list:
    """[(label, value, kind)] for summed /proc/vmstat deltas ``c`` (missing counters count 0,
    as mmtests). ``kind`` is "int" or "float" (for printing)."""
    g = lambda k: int(c.get(k, 0))  # noqa: E731
    pte, huge = g("numa_pte_updates"), g("numa_huge_pte_updates")
    faults, local, migrated = g("numa_hint_faults"), g("numa_hint_faults_local"), g("numa_pages_migrated")
    return [
        ("Minor Faults", g("pgfault"), "int"),
        ("Major Faults", g("pgmajfault"), "int"),
        ("NUMA alloc hit", g("numa_hit"), "int"),
        ("NUMA alloc miss", g("numa_miss"), "int"),
        ("NUMA interleave hit", g("numa_interleave"), "int"),
        ("NUMA alloc local", g("numa_local"), "int"),
        ("NUMA base-page range updates", pte, "int"),
        ("NUMA PTE updates", pte - HPAGE_PMD_NR * huge, "int"),
        ("NUMA PMD updates", huge, "int"),
        ("NUMA hint faults", faults, "int"),
        ("NUMA hint local faults", local, "int"),
        ("NUMA hint local percent", hint_local_percent(faults, local), "float"),
        ("NUMA pages migrated", migrated, "int"),
        ("Page migrate success", g("pgmigrate_success"), "int"),
        ("Page migrate failure", g("pgmigrate_fail"), "int"),
        ("AutoNUMA cost", autonuma_cost(pte, faults, migrated), "float"),
        # numasim's additions (not in mmtests' report)
        ("TLB remote flushes", g("nr_tlb_remote_flush"), "int"),
        ("TLB shootdown IPIs", g("nr_tlb_remote_flush_received"), "int"),
    ]


# ---------------------------------------------------------------- metrics of a run

_MMTESTS_TEST = {"numa01_THREAD_ALLOC": "NUMA01_THREADLOCAL"}


def test_label(result) -> str:
    """mmtests' name for the benchmark a result ran: NUMA01, NUMA01_THREADLOCAL, NUMA02, ...
    for autonuma-benchmark kinds, else the workload kind; several workloads join with '+'."""
    sc = result.scenario
    ws = sc.get("workloads") or sc.get("workload") or []
    if isinstance(ws, dict):
        ws = [ws]
    kinds = [str(w.get("kind", "?")) for w in ws] or ["run"]
    out = []
    for k in kinds:
        if k in _MMTESTS_TEST:
            out.append(_MMTESTS_TEST[k])
        elif k.lower().startswith("numa0"):
            out.append(k.upper())
        else:
            out.append(k)
    return "+".join(out)


def run_metrics(result) -> list:
    """[(metric, value, better)] of one run: mmtests' ``syst-<TEST>`` and ``elsp-<TEST>``
    (system and elapsed seconds, lower is better), and ``tput-<TEST>`` (accesses/s of the
    workload's processes, higher is better) when the run reports a throughput."""
    label = test_label(result)
    out = [
        (f"syst-{label}", float(result.times["system_s"]), LOWER),
        (f"elsp-{label}", float(result.times["elapsed_s"]), LOWER),
    ]
    tput = sum(float(p.get("throughput_aps") or 0.0) for p in result.processes)
    if tput > 0:
        out.append((f"tput-{label}", tput, HIGHER))
    return out


# ---------------------------------------------------------------- columns and table


@dataclass
class Column:
    """One configuration: its name and the results of its runs (iterations, tests)."""

    name: str
    results: list
    sources: list = field(default_factory=list)  # where the results were read from
    scenario_text: str | None = None  # the scenario file of the group, if saved

    def samples(self) -> dict:
        """{metric: (better, [values])}, metrics in first-seen order."""
        out: dict = {}
        for r in self.results:
            for metric, value, better in run_metrics(r):
                out.setdefault(metric, (better, []))[1].append(value)
        return out

    def counters(self) -> dict:
        """Summed counters over every run (vmstat deltas of the whole benchmark)."""
        total: dict = {}
        for r in self.results:
            for k, v in r.counters.items():
                if isinstance(v, (int, float)):
                    total[k] = total.get(k, 0) + v
        return total

    def incomplete(self) -> int:
        """Runs that stopped at run.max_sim_s before their workloads finished."""
        return sum(1 for r in self.results if not r.completed)

    def durations(self) -> dict:
        """Total user, system and elapsed seconds over every run (mmtests' Duration rows)."""
        return {k: sum(float(r.times.get(f"{k.lower()}_s", 0.0)) for r in self.results)
                for k in ("User", "System", "Elapsed")}


@dataclass
class Cell:
    value: float | None
    pct: float | None = None  # percentage against the baseline (None: not shown)
    sig: bool = False


@dataclass
class TableRow:
    stat: str  # "Min", "Amean", ... or "" for single-value rows
    label: str  # metric or vmstat row name
    cells: list  # one Cell per column
    kind: str = "float"  # "float" (2 decimals) or "int"


@dataclass
class Section:
    title: str
    rows: list
    percentages: bool  # the section prints a percentage column


def stat_rows(metric: str, better: str, per_col: list, ddof: int) -> list:
    """The summary rows of one metric. ``per_col``: list of sample lists (base first)."""
    mean_fn, mean_name = (hmean, "Hmean") if better == HIGHER else (amean, "Amean")
    better_diff = pdiff if better == HIGHER else pndiff
    stats = [
        ("Min", min, better_diff),
        (mean_name, mean_fn, better_diff),
        ("Stddev", lambda xs: stddev(xs, ddof), pndiff),
        ("CoeffVar", lambda xs: coeffvar(xs, ddof), pndiff),
        ("Max", max, better_diff),
    ]
    for p in BEST_PERCENTS:
        stats.append((f"B{mean_name}-{p}", lambda xs, p=p: mean_fn(best(xs, p, better)), better_diff))
    base = per_col[0]
    rows = []
    for name, fn, diff in stats:
        base_v = fn(base) if len(base) >= (2 if name in ("Stddev", "CoeffVar") else 1) else None
        cells = []
        for xs in per_col:
            if not xs or (len(xs) < 2 and name in ("Stddev", "CoeffVar")):
                cells.append(Cell(None))  # no run, or the spread of one run: undefined
                continue
            v = fn(xs)
            pct = None
            if base_v is not None and not (math.isnan(v) or math.isnan(base_v)):
                pct = diff(v, base_v)
            sig = name == mean_name and xs is not base and significant(xs, base, ddof)
            cells.append(Cell(v, pct, sig))
        rows.append(TableRow(name, metric, cells))
    return rows


@dataclass
class Comparison:
    columns: list  # Column, baseline first
    sections: list  # Section
    ddof: int = 1
    mismatch: str = ""  # what differs between the columns' tests and runs ("" when nothing)

    def notes(self) -> list:
        """Warnings printed above the tables: incomplete runs, mismatched columns."""
        out = [self.incomplete_note()] if self.incomplete_note() else []
        if self.mismatch:
            out.append(f"MISMATCHED columns (different tests or numbers of runs): {self.mismatch}")
        return out

    def incomplete_note(self) -> str:
        """A warning naming the columns that hold incomplete runs ("" when none does)."""
        bad = [f"{c.name}: {c.incomplete()} of {len(c.results)}" for c in self.columns if c.incomplete()]
        if not bad:
            return ""
        return ("INCOMPLETE runs included (stopped at run.max_sim_s before their workloads "
                "finished; their times are the limit): " + ", ".join(bad))

    # ---------------------------------------------------------- text
    def to_text(self) -> str:
        names = [c.name for c in self.columns]
        blocks = self.notes()
        for s in self.sections:
            if not s.rows:
                continue
            blocks.append(_text_section(s, names))
        return "\n\n".join(blocks) + "\n"

    # ---------------------------------------------------------- data
    def to_dict(self) -> dict:
        def cell(c: Cell) -> dict:
            d = {"value": _json_num(c.value)}
            if c.pct is not None:
                d["pct"] = _json_num(c.pct)
            if c.sig:
                d["significant"] = True
            return d

        return {
            "columns": [{"name": c.name, "runs": len(c.results), "incomplete": c.incomplete(),
                         "sources": [str(s) for s in c.sources]}
                        for c in self.columns],
            "baseline": self.columns[0].name,
            "stddev_ddof": self.ddof,
            "mismatch": self.mismatch or None,
            "sections": [{"title": s.title, "rows": [
                {"stat": r.stat, "label": r.label, "cells": [cell(c) for c in r.cells]} for r in s.rows]}
                for s in self.sections],
        }

    def to_frame(self):
        """The tables as one long pandas DataFrame, a row per (table row, column), in print
        order. Columns: section (the table's title), metric (e.g. elsp-NUMA02, Duration
        Elapsed, NUMA hint faults), stat (Min, Amean, ...; "" for single-value rows), column
        (its name; the baseline first), value, pct (mmtests' percentage against the baseline,
        positive = better; NaN where none is printed), significant (mean rows only)."""
        import pandas as pd

        rows = [{"section": s.title, "metric": r.label, "stat": r.stat, "column": col.name,
                 "value": math.nan if c.value is None else float(c.value),
                 "pct": math.nan if c.pct is None else float(c.pct), "significant": bool(c.sig)}
                for s in self.sections for r in s.rows for col, c in zip(self.columns, r.cells)]
        return pd.DataFrame(rows, columns=["section", "metric", "stat", "column", "value", "pct",
                                           "significant"])

    # ---------------------------------------------------------- html
    def to_html(self) -> str:
        names = [c.name for c in self.columns]
        out = [f'<p class="incomplete">{html.escape(note)}</p>' for note in self.notes()]
        for s in self.sections:
            if not s.rows:
                continue
            out.append(f'<table class="mmtests" data-section="{html.escape(s.title)}">')
            out.append(f"<caption>{html.escape(s.title)}</caption>")
            head = "".join(f'<th colspan="{2 if s.percentages else 1}">{html.escape(n)}</th>' for n in names)
            out.append(f'<thead><tr><th></th><th></th>{head}</tr></thead><tbody>')
            for r in s.rows:
                tds = []
                for c in r.cells:
                    tds.append(f'<td class="num">{html.escape(_fmt_value(c.value, r.kind))}</td>')
                    if s.percentages:
                        tds.append(f'<td class="{_pct_class(c)}">{html.escape(_fmt_pct(c))}</td>')
                out.append(f"<tr><th>{html.escape(r.stat)}</th><th>{html.escape(r.label)}</th>{''.join(tds)}</tr>")
            out.append("</tbody></table>")
        return "\n".join(out)


def _pct_class(c: Cell) -> str:
    """CSS classes of a percentage cell: `better` (an improvement: the percentage is positive
    for every row kind), `worse`, and `sig` when the mean differs significantly."""
    cls = ["pct"]
    if c.pct is not None and c.value is not None and c.pct != 0:
        cls.append("better" if c.pct > 0 else "worse")
    if c.sig:
        cls.append("sig")
    return " ".join(cls)


def _json_num(v):
    if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
        return None
    return v


def _fmt_value(v, kind: str) -> str:
    """A table cell; "-" where the statistic is undefined (no run, or the Stddev of one)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if kind == "int":
        return str(int(round(v)))
    return f"{v:.2f}"


def _fmt_pct(c: Cell) -> str:
    """mmtests: ``(  x.xx%)``, or ``*  x.xx%*`` when significant."""
    if c.value is None or c.pct is None:
        return ""
    body = f"{c.pct:6.2f}%"
    return f"*{body}*" if c.sig else f"({body})"


def _text_section(s: Section, names: list) -> str:
    """One section as text. Each column is as wide as its widest value and percentage (or
    its name), values and percentages right-aligned in it, so they line up at any size."""
    stat_w = max((len(r.stat) for r in s.rows), default=0)
    label_w = max(len(r.label) for r in s.rows)
    ncol = len(names)
    val_w = [max([8] + [len(_fmt_value(r.cells[j].value, r.kind)) for r in s.rows]) for j in range(ncol)]
    pct_w = [max([9] + [len(_fmt_pct(r.cells[j])) for r in s.rows]) if s.percentages else 0 for j in range(ncol)]
    cell_w = [v + (p + 1 if p else 0) for v, p in zip(val_w, pct_w)]
    col_w = [max(w, len(n)) for w, n in zip(cell_w, names)]
    lead = (stat_w + 1 if stat_w else 0) + label_w
    lines = [s.title, " " * lead + "".join(" " + n.rjust(w) for n, w in zip(names, col_w))]
    for r in s.rows:
        left = (r.stat.ljust(stat_w) + " " if stat_w else "") + r.label.ljust(label_w)
        cells = []
        for j, c in enumerate(r.cells):
            text = _fmt_value(c.value, r.kind).rjust(val_w[j])
            if s.percentages:
                text += " " + _fmt_pct(c).rjust(pct_w[j])
            cells.append(" " + text.rjust(col_w[j]))
        lines.append((left + "".join(cells)).rstrip())
    return "\n".join(lines)


def compare(columns: list, baseline: str | None = None, ddof: int = 1, title: str | None = None,
            allow_mismatch: bool = False) -> Comparison:
    """Build the comparison of ``columns`` (list of Column). ``baseline`` names the column
    the percentages refer to (default: the first); it is printed first. Columns that ran
    different tests, or a test a different number of times, are refused (ValueError) unless
    ``allow_mismatch``, which flags them in the tables instead."""
    if not columns:
        raise ValueError("nothing to compare")
    cols = list(columns)
    differ = mismatch(cols)
    if differ and not allow_mismatch:
        raise ValueError(f"the columns did not run the same tests the same number of times ({differ}); "
                         "--allow-mismatch compares them anyway, flagged")
    if baseline is not None:
        idx = [i for i, c in enumerate(cols) if c.name == baseline]
        if not idx:
            raise ValueError(f"baseline {baseline!r} is not one of the columns: {', '.join(c.name for c in cols)}")
        cols.insert(0, cols.pop(idx[0]))

    # benchmark metrics: union over columns, in first-seen order
    samples = [c.samples() for c in cols]
    seen: dict = {}
    for s in samples:
        for m, (better, _) in s.items():
            seen.setdefault(m, better)
    # mmtests lists one kind after the other (syst-A, syst-B, elsp-A, elsp-B), tests in order
    kinds = list(dict.fromkeys(m.split("-", 1)[0] for m in seen))
    metrics = {m: seen[m] for k in kinds for m in seen if m.split("-", 1)[0] == k}
    # mmtests orders by statistic, then by metric (all Min rows, then all Amean rows, ...)
    per_metric = {m: stat_rows(m, better, [s.get(m, (better, []))[1] for s in samples], ddof)
                  for m, better in metrics.items()}
    bench_rows = []
    n_stats = len(next(iter(per_metric.values()))) if per_metric else 0
    for i in range(n_stats):
        for m in metrics:
            bench_rows.append(per_metric[m][i])

    durations = [c.durations() for c in cols]
    duration_rows = [TableRow("", f"Duration {k}", [Cell(d[k]) for d in durations])
                     for k in ("User", "System", "Elapsed")]

    vm = [vmstat_rows(c.counters()) for c in cols]
    vm_rows = [TableRow("", label, [Cell(v[i][1]) for v in vm], kind=kind)
               for i, (label, _, kind) in enumerate(vm[0])]

    title = title or _default_title(cols)
    return Comparison(cols, [
        Section(title, bench_rows, percentages=True),
        Section("Duration (all runs of the column)", duration_rows, percentages=False),
        Section("vmstat (summed over all runs of the column)", vm_rows, percentages=False),
    ], ddof=ddof, mismatch=differ)


def _default_title(cols: list) -> str:
    """The workloads compared: `autonumabench: NUMA01, NUMA02` for autonuma-benchmark tests
    (mmtests' name for the suite), else the tests' names."""
    kinds = []
    for c in cols:
        for r in c.results:
            label = test_label(r)
            if label not in kinds:
                kinds.append(label)
    if kinds and all(k.startswith("NUMA0") and "+" not in k for k in kinds):
        return "autonumabench: " + ", ".join(kinds)
    return ", ".join(kinds) or "results"


def runs_per_test(column) -> dict:
    """{test label: number of runs} of a column."""
    out: dict = {}
    for r in column.results:
        label = test_label(r)
        out[label] = out.get(label, 0) + 1
    return out


def mismatch(columns: list) -> str:
    """What makes ``columns`` not comparable run for run: tests that only some columns ran,
    or a test run a different number of times ("" when they match)."""
    counts = [runs_per_test(c) for c in columns]
    problems = []
    tests = list(dict.fromkeys(t for n in counts for t in n))
    for t in tests:
        per_col = [n.get(t, 0) for n in counts]
        if len(set(per_col)) > 1:
            shown = ", ".join(f"{c.name} {k}" for c, k in zip(columns, per_col))
            problems.append(f"{t} runs: {shown}")
    return "; ".join(problems)

"""`numasim fidelity`: every reference number the project knows beside the simulated value.

Two kinds of reference:

- **changelog**: the figures of the seed changelogs that the shipped experiments quote
  (`Row.reference` of every experiment's rows; `numasim reproduce all` runs them);
- **vm**: the real-kernel boots shipped as data (`validation/results/`, realkernel/bootdata.py):
  each boot is simulated again with the costs it measured, and every count and time that
  `numasim validate --calibrate` checks is set beside the VM's.

Each figure is **in-sample** when a constant its runs use was derived from its own source,
**out-of-sample** otherwise. The rule is computed from the machine profiles' `[source]` tables:
a constant whose citation is `derived: NAME (...)` was fitted to the runs of NAME (an experiment
or a validation scenario; any other NAME is an error). Every figure of source E is in-sample
when one of E's runs uses a profile with a constant derived from E and does not set that
constant itself. This is per source, not per figure: a fitted bandwidth moves every time and
every count paced by time in E's runs, not only the figure it was fitted to.

A figure is counted when its reference is a nonzero number (as `Row.magnitudes()`); the others
are listed with the reason they are not counted: a reference of 0, a VM time of a boot that
stopped at its time limit, or a changelog comparison that another row of the experiment already
quotes (the same column, reference and simulated value). Placements (categorical) are left out.
A counted figure whose simulated value is missing, 0 or of the other sign is a miss beyond any
band (|log2| infinite), not left out.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass

from numasim.scenario import UsageError

CHANGELOG, VM = "changelog", "vm"
KINDS = (CHANGELOG, VM)
KIND_TITLE = {CHANGELOG: "seed changelogs", VM: "real kernels (calibrated QEMU TCG boots)"}
IN, OUT = "in", "out"
WITHIN_25 = 0.25
WORST = 5


@dataclass
class Figure:
    """One reference number beside the simulated one."""

    kind: str  # CHANGELOG or VM
    source: str  # the experiment, or the validation scenario
    metric: str
    column: str  # the experiment's column, or "KERNEL boot N"
    reference: object
    simulated: object
    sample: str = OUT  # IN or OUT
    note: str = ""  # why it is not counted, beyond its reference
    boot: str = ""  # VM: the boot's time stamp

    @property
    def counted(self) -> bool:
        r = self.reference
        return not self.note and _number(r) and r != 0

    @property
    def ratio(self):
        """simulated / reference (counted figures with a number simulated), else None."""
        if not self.counted or not _number(self.simulated):
            return None
        return self.simulated / self.reference

    @property
    def log2(self) -> float | None:
        """|log2(simulated / reference)|: inf for a missing, zero or opposite-sign simulated
        value; None when not counted."""
        if not self.counted:
            return None
        r = self.ratio
        return abs(math.log2(r)) if r is not None and r > 0 else math.inf

    @property
    def reason(self) -> str:
        """Why the figure is not counted ("" when it is)."""
        if self.note:
            return self.note
        if not _number(self.reference):
            return "reference is not a number"
        return "reference is 0" if self.reference == 0 else ""

    def within(self, band: float) -> bool:
        """simulated / reference in [1 - band, 1 + band] (band < 1) or [1/band, band] (band > 1)."""
        r = self.ratio
        if r is None or r <= 0:
            return False
        return 1 - band <= r <= 1 + band if band < 1 else 1 / band <= r <= band

    def to_dict(self) -> dict:
        d = {"kind": self.kind, "source": self.source, "metric": self.metric, "column": self.column,
             "reference": self.reference, "simulated": self.simulated, "sample": self.sample,
             "counted": self.counted, "ratio": self.ratio, "abs_log2": _finite(self.log2)}
        if self.counted:
            d["within_25pct"], d["within_2x"] = self.within(WITHIN_25), self.within(2.0)
        if self.reason:
            d["not_counted"] = self.reason
        if self.boot:
            d["boot"] = self.boot
        return d


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _finite(x):
    return x if x is None or math.isfinite(x) else None


# ---------------------------------------------------------------- in-sample rule


def known_sources() -> list:
    """Names a `derived:` citation may give: the shipped experiments and validation scenarios."""
    from numasim.experiments import registry
    from numasim.realkernel.validate import shipped

    return sorted(set(registry.names()) | set(shipped()))


def derived_from(citation: str) -> str:
    """The source a `derived: NAME (...)` citation names (the text up to a space or `(`)."""
    text = citation.split(":", 1)[1].strip() if ":" in citation else ""
    return text.split("(")[0].split()[0].rstrip(",;") if text.split("(")[0].split() else ""


def profile_sources(profile_text: str) -> dict:
    """{constant: (kind, citation)} of a profile's [source] table."""
    from numasim.scenario import tomllib

    out = {}
    for key, v in (tomllib.loads(profile_text).get("source") or {}).items():
        kind = str(v).split(":", 1)[0].strip()
        out[key] = (kind, str(v))
    return out


def derived_constants(profiles: dict | None = None, known: list | None = None) -> dict:
    """{profile: {constant: source name}} of every `derived` constant of the built-in machine
    profiles (``profiles``: {name: TOML text}, for tests). A derived constant that names no
    known source is a UsageError: its figures could not be told apart."""
    import numasim

    if profiles is None:
        profiles = {n: numasim.machine_profile_toml(n) for n in numasim.machine_profiles()}
    known = known_sources() if known is None else known
    out: dict = {}
    for name, text in profiles.items():
        for key, (kind, citation) in profile_sources(text).items():
            if kind != "derived":
                continue
            src = derived_from(citation)
            if src not in known:
                raise UsageError(f"machine profile {name}: [source] {key} = {citation!r} names {src!r}, which is "
                                 f"neither a shipped experiment nor a validation scenario ({', '.join(known)}); "
                                 "a derived constant must name the runs it was fitted to")
            out.setdefault(name, {})[key] = src
    return out


def _sets(d: dict, key: str) -> bool:
    """Scenario dict `d` gives machine constant `key` itself (not from its profile)."""
    m = d.get("machine") or {}
    return key in m or key in (m.get("cost") or {})


def in_sample_constants(source: str, scenarios, derived: dict) -> list:
    """["profile.constant", ...] derived from `source` that its runs (scenario dicts) use."""
    from numasim.scenario import DEFAULT_MACHINE

    used = set()
    for d in scenarios:
        profile = (d.get("machine") or {}).get("profile", DEFAULT_MACHINE)
        for key, src in derived.get(profile, {}).items():
            if src == source and not _sets(d, key):
                used.add(f"{profile}.{key}")
    return sorted(used)


def experiment_scenarios(name: str) -> list:
    """The scenario dicts of a shipped experiment's runs."""
    from numasim.experiments import registry
    from numasim.scenario import parse_toml

    return [parse_toml(t) for t in registry.get(name).scenarios().values()]


# ---------------------------------------------------------------- figures


def changelog_figures(results: list, derived: dict) -> tuple:
    """([Figure], {experiment: in-sample constants}) of ExperimentResults: one figure per
    referenced (metric, column)."""
    from numasim.experiments import registry

    figures, rule = [], {}
    for res in results:
        name = base_name(res.experiment)
        if name not in registry.names():
            raise UsageError(f"experiment {res.experiment!r} is not a shipped experiment "
                             f"({', '.join(registry.names())})")
        rule[name] = in_sample_constants(name, experiment_scenarios(name), derived)
        sample = IN if rule[name] else OUT
        first: dict = {}  # (column, reference, simulated) -> the row that set them side by side first
        for r in res.rows:
            for col, ref in r.reference.items():
                f = Figure(CHANGELOG, name, r.metric, str(col), ref, r.values.get(col), sample)
                key = (f.column, repr(ref), repr(f.simulated))
                if key in first and f.counted:  # the same comparison quoted by a second row: counted once
                    f.note = f"repeats {first[key]}"
                first.setdefault(key, r.metric)
                figures.append(f)
    return figures, rule


def base_name(experiment: str) -> str:
    """`name x3` (reproduce NAME --iterations 3) -> `name`."""
    head, _, tail = experiment.rpartition(" x")
    return head if head and tail.isdigit() else experiment


def vm_figures(boots: list, sims: dict, derived: dict) -> tuple:
    """([Figure], {scenario: in-sample constants}) of shipped boots simulated again: `sims`
    maps each boot's index to its simulated Result."""
    from numasim.realkernel import bootdata
    from numasim.realkernel.compare import TIMES

    figures, rule, seen = [], {}, {}
    for i, b in enumerate(boots):
        name = b["scenario"]
        seen[(name, b["kernel"])] = seen.get((name, b["kernel"]), 0) + 1
        column = f"{b['kernel']} boot {seen[(name, b['kernel'])]}"
        used = in_sample_constants(name, [bootdata.scenario(b)], derived)
        rule[name] = sorted(set(rule.get(name, [])) | set(used))
        cmp = bootdata.compare(b, sims[i])
        for r in cmp["rows"]:
            if not r["checked"] or isinstance(r["vm"], str) or isinstance(r["sim"], str):
                continue  # placements: categorical
            note = ""
            if r["metric"] in TIMES and not b["vm"].get("completed", True):
                note = "the VM run stopped at its time limit"
            elif r["vm"] is None:
                note = "no VM value"
            figures.append(Figure(VM, name, r["metric"], column, r["vm"], r["sim"], IN if used else OUT, note,
                                  boot=b["boot"]))
    return figures, rule


# ---------------------------------------------------------------- summary


def stats(figures: list) -> dict:
    """Counted figures: how many, within ±25% and within 2x (count and share), median
    |log2(sim/ref)|; and how many were not counted."""
    comp = [f for f in figures if f.counted]
    n = len(comp)
    w25 = sum(1 for f in comp if f.within(WITHIN_25))
    w2 = sum(1 for f in comp if f.within(2.0))
    med = statistics.median(f.log2 for f in comp) if comp else None
    return {"figures": n, "within_25pct": w25, "within_2x": w2,
            "share_within_25pct": w25 / n if n else None, "share_within_2x": w2 / n if n else None,
            "median_abs_log2": _finite(med) if med is not None else None,
            "median_infinite": med is not None and not math.isfinite(med),
            "not_counted": len(figures) - n}


def summary(figures: list) -> dict:
    """Stats per source (each source is in- or out-of-sample as a whole), per kind and overall,
    out-of-sample and in-sample apart, and the worst misses of each."""
    sources = []
    for kind in KINDS:
        for name in sorted({f.source for f in figures if f.kind == kind}):
            fs = [f for f in figures if f.kind == kind and f.source == name]
            samples = sorted({f.sample for f in fs})
            sources.append({"kind": kind, "source": name, "sample": "/".join(samples), **stats(fs)})
    out = {"by_source": sources}
    for sample, label in ((OUT, "out_of_sample"), (IN, "in_sample")):
        fs = [f for f in figures if f.sample == sample]
        out[label] = {"all": stats(fs), **{kind: stats([f for f in fs if f.kind == kind]) for kind in KINDS}}
    for sample, label in ((OUT, "worst_out_of_sample"), (IN, "worst_in_sample")):
        misses = sorted((f for f in figures if f.sample == sample and f.counted), key=lambda f: -f.log2)
        out[label] = [f.to_dict() for f in misses[:WORST]]
    return out


# ---------------------------------------------------------------- output


def _fmt(v) -> str:
    from numasim.experiments.registry import _fmt as fmt

    return fmt(v, compact=True)


def _ratio(f: Figure) -> str:
    if not f.counted:
        return "-"
    r = f.ratio
    if r is None:
        return "no value"
    if r == 0:
        return "0"
    if r < 0:
        return "sign"
    return f"{r:.2f}" if 0.01 <= r < 100 else f"{r:.3g}"


def _times(f: Figure) -> str:
    r = f.ratio
    if r is None:
        return "no simulated value"
    return "opposite sign" if r < 0 else f"{_ratio(f)}x"


def _mark(f: Figure) -> str:
    if not f.counted:
        return f.reason
    return ">2x" if not f.within(2.0) else ""


def _columns(head: list, rows: list) -> list:
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    return [fmt.format(*head).rstrip(), fmt.format(*("-" * w for w in widths)).rstrip()] + \
        [fmt.format(*r).rstrip() for r in rows]


def _share(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "-"


def _median(s: dict) -> str:
    if s["figures"] == 0:
        return "-"
    return "inf" if s["median_infinite"] else f"{s['median_abs_log2']:.2f}"


def stats_row(label: str, s: dict) -> list:
    return [label, str(s["figures"]), _share(s["within_25pct"], s["figures"]),
            _share(s["within_2x"], s["figures"]), _median(s), str(s["not_counted"])]


def summary_lines(report: dict) -> list:
    """The summary: a line per source, then out-of-sample and in-sample totals, the worst
    misses of each."""
    s = report["summary"]
    head = ["source", "kind", "sample", "figures", "within ±25%", "within 2x", "median |log2|", "not counted"]
    rows = [[x["source"], x["kind"], x["sample"], *stats_row("", x)[1:]] for x in s["by_source"]]
    out = _columns(head, rows) + [""]
    head = ["", "figures", "within ±25%", "within 2x", "median |log2|", "not counted"]
    rows = []
    for label, key in (("out-of-sample", "out_of_sample"), ("in-sample", "in_sample")):
        for kind in KINDS:
            rows.append(stats_row(f"{label}, {KIND_TITLE[kind].split(' (')[0]}", s[key][kind]))
        rows.append(stats_row(f"{label}, all", s[key]["all"]))
    out += _columns(head, rows)
    o = s["out_of_sample"]["all"]
    kinds = ", ".join(f"{s['out_of_sample'][k]['figures']} {KIND_TITLE[k].split(' (')[0]}" for k in KINDS)
    out += ["", f"fidelity: {o['figures']} out-of-sample figures ({kinds}): {_share(o['within_25pct'], o['figures'])} "
                f"within ±25%, {_share(o['within_2x'], o['figures'])} within 2x, median |log2(sim/ref)| "
                f"{_median(o)}"]
    for key, label in (("worst_out_of_sample", "out-of-sample"), ("worst_in_sample", "in-sample")):
        if s[key]:
            out += ["", f"worst {len(s[key])} {label} misses (by |log2(sim/ref)|):"]
            for w in s[key]:
                out.append(f"  {w['source']}: {w['metric']} [{w['column']}] simulated {_fmt(w['simulated'])}, "
                           f"reference {_fmt(w['reference'])} ({_times(Figure(**_figure_args(w)))})")
    return out


def _figure_args(d: dict) -> dict:
    keys = ("kind", "source", "metric", "column", "reference", "simulated", "sample", "boot")
    return {k: d.get(k, "") for k in keys}


def table_lines(figures: list) -> list:
    head = ["source", "metric", "column", "reference", "simulated", "sim/ref", "sample", ""]
    out = []
    for kind in KINDS:
        fs = [f for f in figures if f.kind == kind]
        if not fs:
            continue
        rows = [[f.source, f.metric, f.column, _fmt(f.reference), _fmt(f.simulated), _ratio(f), f.sample, _mark(f)]
                for f in fs]
        out += [f"== {KIND_TITLE[kind]}", *_columns(head, rows), ""]
    return out


def report(figures: list, rule: dict, missing: list = (), stale: list = ()) -> dict:
    have = {f.source for f in figures}
    return {"figures": [f.to_dict() for f in figures], "summary": summary(figures),
            "in_sample_constants": {k: v for k, v in sorted(rule.items())},
            "sources_without_references": sorted(k for k in rule if k not in have),
            "experiments_not_included": list(missing), "stale_boots": list(stale)}


def to_text(figures: list, rep: dict) -> str:
    out = table_lines(figures)
    ins = {k: v for k, v in rep["in_sample_constants"].items() if v}
    if ins:
        out.append("in-sample (a constant these runs use was derived from their own figures):")
        out += [f"  {k}: {', '.join(v)}" for k, v in ins.items()]
        out.append("")
    if rep["sources_without_references"]:
        out += [f"no reference figures: {', '.join(rep['sources_without_references'])} (checks of directions "
                "and tolerances only: `numasim reproduce NAME`)", ""]
    if rep["experiments_not_included"]:
        out += [f"not included: {', '.join(rep['experiments_not_included'])} (not in the saved results)", ""]
    for b in rep["stale_boots"]:
        out.append(f"not compared: {b['scenario']} on {b['kernel']} ({b['boot']}): the shipped scenario's "
                   f"{', '.join(b['changed'])} changed since the boot")
    if rep["stale_boots"]:
        out.append("")
    return "\n".join(out + summary_lines(rep))


# ---------------------------------------------------------------- inputs


def load_results(paths: list) -> list:
    """ExperimentResults from saved `numasim reproduce all --json` (or `reproduce NAME
    --json`) output; a UsageError says what is wrong with a file."""
    from numasim.experiments.registry import ExperimentResult, Row
    from numasim.textfile import read_text

    out, seen = [], {}
    for p in paths:
        try:
            data = json.loads(read_text(p))
        except json.JSONDecodeError as e:
            raise UsageError(f"{p}: not JSON ({e})") from None
        exps = data.get("experiments") if isinstance(data, dict) and "experiments" in data else [data]
        if not isinstance(exps, list) or not exps:
            raise UsageError(f"{p}: no experiments (expected `numasim reproduce all --json` output)")
        for i, e in enumerate(exps, 1):
            if not isinstance(e, dict) or not isinstance(e.get("experiment"), str) or \
                    not isinstance(e.get("rows"), list):
                raise UsageError(f"{p}: experiment {i} is not an experiment's result (expected "
                                 "`numasim reproduce all --json` output: experiment, columns, rows)")
            name = e["experiment"]
            if base_name(name) in seen:
                raise UsageError(f"{p}: experiment {name} is also in {seen[base_name(name)]}")
            seen[base_name(name)] = p
            rows = []
            for j, r in enumerate(e["rows"], 1):
                if not isinstance(r, dict) or not isinstance(r.get("metric"), str) or \
                        not isinstance(r.get("values"), dict) or not isinstance(r.get("reference", {}), dict):
                    raise UsageError(f"{p}: {name} row {j} needs metric, values and (optionally) reference")
                rows.append(Row(r["metric"], r["values"], reference=r.get("reference", {}),
                                check=r.get("check", ""), ok=bool(r.get("ok", True)), kind=r.get("kind", "")))
            out.append(ExperimentResult(name, list(e.get("columns", [])), rows))
    return out


def simulate_boots(boots: list, jobs: int = 2, status=None, with_sampler: bool = True) -> dict:
    """{index: Result} of every boot simulated again (as validate --calibrate); a run that
    fails is an error naming the boot."""
    from numasim.experiments.registry import run_many
    from numasim.realkernel import bootdata
    from numasim.scenario import to_toml

    scenarios = {f"{i + 1:02d} {b['scenario']} {b['kernel']}": to_toml(bootdata.scenario(b, with_sampler))
                 for i, b in enumerate(boots)}
    line = status(list(scenarios)) if status is not None and scenarios else None
    try:
        outcomes = run_many(scenarios, max_workers=jobs, status=line)
    finally:
        if line is not None:
            line.close()
    out = {}
    for i, key in enumerate(scenarios):
        o = outcomes[key]
        if o.result is None:
            raise UsageError(f"the simulation of boot {key} failed: {o.error}")
        out[i] = o.result
    return out


# ---------------------------------------------------------------- command


def build(results: list | None, boots: list | None, jobs: int = 2, status=None, with_sampler: bool = True) -> tuple:
    """(figures, report) of experiment results and shipped boots (either may be None: left
    out). Boots whose shipped scenario changed since they ran are listed, not compared."""
    from numasim.experiments import registry
    from numasim.realkernel import bootdata

    derived = derived_constants()
    figures, rule, missing, stale = [], {}, [], []
    if results is not None:
        f, r = changelog_figures(results, derived)
        figures += f
        rule.update(r)
        have = {base_name(x.experiment) for x in results}
        missing = [n for n in registry.names() if n not in have]
    if boots is not None:
        current = []
        for b in boots:
            changed = bootdata.stale(b)
            if changed:
                stale.append({"scenario": b["scenario"], "kernel": b["kernel"], "boot": b["boot"], "changed": changed})
            else:
                current.append(b)
        sims = simulate_boots(current, jobs=jobs, status=status, with_sampler=with_sampler)
        f, r = vm_figures(current, sims, derived)
        figures += f
        rule.update(r)
    return figures, report(figures, rule, missing, stale)


def cmd_fidelity(args) -> int:
    import sys

    from numasim.cli import check_jobs_and_iterations
    from numasim.cli_reports import _note, run_experiments, runs_status
    from numasim.realkernel import bootdata

    args.iterations = 1
    check_jobs_and_iterations(args)
    if args.from_ and args.only == VM:
        raise UsageError("--from gives the changelog figures; --only vm leaves them out: give one")
    results = boots = None
    if args.only != VM:
        results = load_results(args.from_) if args.from_ else run_experiments(args, title="fidelity")
    if args.only != "changelogs":
        boots = bootdata.load()
        _note(f"fidelity: simulating {len(boots)} real-kernel boots again")
    figures, rep = build(results, boots, jobs=args.jobs,
                         status=runs_status(args, "fidelity: real-kernel boots") if boots else None,
                         with_sampler=not args.no_sampler)
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        print(to_text(figures, rep))
    sys.stdout.flush()
    return 0


HELP = """\
Every reference number the project knows, beside the simulated value and their ratio: the
seed changelogs' figures quoted by the shipped experiments (as `numasim reproduce all` runs
them), and the real-kernel boots shipped with the package (python/numasim/validation/results/,
each simulated again with the costs it measured, as `validate --calibrate`: its checked counts
and times). Then, per source and overall, out-of-sample and in-sample apart: how many figures,
the share within ±25% and within 2x, the median |log2(sim/ref)|; and the worst misses of each.

In-sample rule: a machine profile constant whose [source] says `derived: NAME (...)` was
fitted to the runs of NAME (an experiment or a validation scenario; any other NAME is an
error). Every figure of a source is in-sample when one of its runs uses a profile with a
constant derived from that source (and does not set the constant itself); all other figures
are out-of-sample. A figure is counted when its reference is a nonzero number (and it repeats
no other row's); a zero, missing or opposite-sign simulated value is then a miss beyond 2x. Without --from, all
experiments run first (~15 min on 2 cores)."""


def register(subparsers, command) -> None:
    """Add `fidelity` to the numasim command line (``command``: cli_parser._command)."""
    sp = command(subparsers, "fidelity", "every reference number beside the simulated one, in- and out-of-sample",
                 HELP, "  numasim fidelity\n  numasim reproduce all --json > all.json && numasim fidelity --from all.json"
                 "\n  numasim fidelity --only vm --json", cmd_fidelity)
    sp.add_argument("--from", dest="from_", action="append", metavar="FILE",
                    help="take the changelog figures from saved `numasim reproduce all --json` (or `reproduce "
                         "NAME --json`) output instead of running the experiments (repeatable)")
    sp.add_argument("--only", choices=["changelogs", VM],
                    help="only the seed changelogs' figures, or only the real-kernel boots'")
    sp.add_argument("--json", action="store_true", help="print every figure and the summary as JSON")
    sp.add_argument("--no-sampler", action="store_true",
                    help="simulate each boot without the VM's runner beside the workload (`validate --no-sampler`)")
    from numasim.cli_parser import JOBS_HELP

    sp.add_argument("--jobs", "-j", type=int, metavar="J", help=JOBS_HELP)

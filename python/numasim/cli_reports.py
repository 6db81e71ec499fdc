"""The report side of the `numasim` command: `run --iterations`, `compare`, `plot`,
`report` and `reproduce all` (cli.py registers them and dispatches here)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from numasim.result import IncompleteRunWarning
from numasim.scenario import UsageError

# `numasim run`: the run (or an iteration) stopped at run.max_sim_s before its workloads finished
EXIT_INCOMPLETE = 3


def interactive() -> bool:
    """Progress output goes to stderr only when it is a terminal."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def make_progress(args, label: str = ""):
    """A Progress bar for a single in-process run, or None (not a terminal, or --json)."""
    if getattr(args, "json", False) or not interactive():
        return None
    from numasim.progress import Progress

    return Progress(label=label)


def _note(msg: str) -> None:
    if interactive():
        print(msg, file=sys.stderr)


# ---------------------------------------------------------------- run


def run_single(text: str, args):
    """One run (with a progress bar on a terminal); saves JSON + Parquet sidecars."""
    import numasim
    from numasim import storage

    bar = make_progress(args)
    try:
        with warnings.catch_warnings():  # the CLI says it itself (warn_incomplete)
            warnings.simplefilter("ignore", IncompleteRunWarning)
            result = numasim.run(text, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    if args.save:
        storage.save_result(result, args.save)
    return result


def runs_status(args, title: str):
    """A factory of progress.RunsProgress lines (keys -> status) on a terminal without
    --json, else None."""
    if getattr(args, "json", False) or not interactive():
        return None
    from numasim.progress import RunsProgress

    return lambda keys: RunsProgress(keys, title=title)


def run_iterations(text: str, args) -> int:
    """`numasim run ... --iterations N`: N seeded runs, saved as a group, summarised as one
    mmtests column."""
    from numasim import storage
    from numasim.compare import Column, compare
    from numasim.repeat import iteration_label, iteration_scenarios, run_iterations as run_n

    n = args.iterations
    make = runs_status(args, f"{n} iterations")
    status = make([iteration_label(s) for s, _ in iteration_scenarios(text, n, args.seed)]) if make else None
    try:
        with warnings.catch_warnings():  # the CLI says it itself (warn_incomplete)
            warnings.simplefilter("ignore", IncompleteRunWarning)
            results = run_n(text, n, jobs=args.jobs, status=status)
    finally:
        if status is not None:
            status.close()
    if args.save:
        storage.save_iterations(results, args.save, scenario_text=text)
    if args.json:
        print("[" + ",\n".join(r.to_json().strip() for r in results) + "]")
        return warn_incomplete(results)
    name = Path(args.save).name if args.save else "run"
    seeds = [r.seed for r in results]
    print(f"{n} iterations, seeds {seeds[0]}..{seeds[-1]}" + (f", saved in {args.save}" if args.save else ""))
    print()
    print(compare([Column(name, results)]).to_text(), end="")
    return warn_incomplete(results)


def warn_incomplete(results: list) -> int:
    """A `warning:` line on stderr for runs that stopped at run.max_sim_s; returns the exit
    status (EXIT_INCOMPLETE if any did, else 0)."""
    bad = [r for r in results if not r.completed]
    if not bad:
        return 0
    if len(results) == 1:
        print(f"warning: {bad[0].incomplete_message()}", file=sys.stderr)
    else:
        seeds = ", ".join(str(r.seed) for r in bad)
        print(f"warning: {len(bad)} of {len(results)} iterations (seed {seeds}) stopped at run.max_sim_s "
              "before their workloads finished: their times are the limit, not the workloads' "
              "(raise run.max_sim_s)", file=sys.stderr)
    return EXIT_INCOMPLETE


def refuse_incomplete(columns: list, args) -> None:
    """compare/plot/report use runs that stopped at run.max_sim_s only with --allow-incomplete
    (and then mark them); UsageError naming the files otherwise."""
    if getattr(args, "allow_incomplete", False):
        return
    bad = [str(src) for c in columns for r, src in zip(c.results, c.sources or [c.name] * len(c.results))
           if not r.completed]
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise UsageError(f"{bad[0]}{more}: stopped at run.max_sim_s before its workloads finished, "
                         "so its times are the limit, not the workloads'; --allow-incomplete uses "
                         "such runs, marked")


# ---------------------------------------------------------------- compare / plot / report


def cmd_compare(args) -> int:
    from numasim import storage
    from numasim.compare import compare

    cols = storage.load_columns(args.results)
    refuse_incomplete(cols, args)
    try:
        cmp = compare(cols, baseline=args.baseline, ddof=args.ddof, allow_mismatch=args.allow_mismatch)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(cmp.to_dict(), indent=1))
    else:
        print(cmp.to_text(), end="")
    return 0


def cmd_plot(args) -> int:
    from numasim import storage
    from numasim.compare import test_label
    from numasim.outpaths import check_output
    from numasim.plot import plot_result

    check_output(args.out, "dir", "--out")
    out = Path(args.out)
    cols = [storage.load_columns([spec])[0] for spec in args.results]
    refuse_incomplete(cols, args)
    for col in cols:
        labels = list(dict.fromkeys(test_label(r) for r in col.results))
        seen = set()
        for src, r in zip(col.sources, col.results):
            label = test_label(r)
            if label in seen:  # a group: the first run of each test
                continue
            seen.add(label)
            name = col.name if len(labels) == 1 else f"{col.name}-{label}"
            written, skipped = plot_result(r, out, name)
            for plot, paths in written.items():
                print(f"{plot}: " + ", ".join(str(p) for p in paths))
            for plot, why in skipped.items():
                print(f"{plot}: skipped ({why})", file=sys.stderr)
    return 0


def cmd_report(args) -> int:
    from numasim import storage
    from numasim.outpaths import check_output
    from numasim.report import write_report

    check_output(args.out, "dir", "--out")
    cols = storage.load_columns(args.results)
    refuse_incomplete(cols, args)
    try:
        page = write_report(cols, args.out, baseline=args.baseline, title=args.title, ddof=args.ddof,
                            allow_mismatch=args.allow_mismatch)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(page)
    return 0


# ---------------------------------------------------------------- reproduce


def run_experiments(args, overrides=None, title: str = "reproduce all") -> list:
    """Every shipped experiment (reproduce_all.run_all): on a terminal, a status line of the
    runs (not with --json) and a line per finished experiment on stderr."""
    from numasim import reproduce_all as ra

    names = ra.registry.names()

    def status(name):
        i = names.index(name) + 1
        return runs_status(args, f"{title}: {i}/{len(names)} {name}")

    def done(name, res, wall):
        _note(f"{title}: {name} {'PASS' if res.passed else 'FAIL'} in {wall:.1f} s")

    return ra.run_all(max_workers=args.jobs, overrides=overrides, status=status, on_done=done)


def reproduce_all(args, overrides) -> int:
    from numasim import reproduce_all as ra

    results = run_experiments(args, overrides)
    print(ra.to_json(results) if args.json else ra.to_text(results))
    return 1 if args.strict and not all(r.passed for r in results) else 0


def reproduce_one(exp, args, overrides):
    """One experiment, with a status line on a terminal: which of its runs are going."""
    return exp.run(max_workers=args.jobs, overrides=overrides, status=runs_status(args, exp.name))


def reproduce_iterations(exp, args, overrides) -> int:
    from numasim.reproduce_all import experiment_iterations

    n = args.iterations
    res = experiment_iterations(
        exp, n, max_workers=args.jobs, overrides=overrides,
        status=lambda i: runs_status(args, f"{exp.name}: iteration {i}/{n}"),
        on_done=lambda k, total: _note(f"{exp.name}: iteration {k}/{total} done"))
    print(res.to_json() if args.json else res.to_table())
    return 1 if args.strict and not res.passed else 0


# ---------------------------------------------------------------- parser


MISMATCH_HELP = ("compare columns that ran different tests or different numbers of runs "
                 "(refused by default), flagged in the tables")
INCOMPLETE_HELP = ("use runs that stopped at run.max_sim_s before their workloads finished "
                   "(refused by default), marked as incomplete")


def add_parsers(sub, command) -> None:
    """Register compare, plot and report on the `numasim` subparsers (``command``:
    cli_parser._command, which adds the description and example)."""
    sp = command(sub, "compare", "compare saved results in mmtests' compare-kernels layout",
                  "Compare saved results, one column per result file or group directory: the "
                  "benchmark metrics' statistics with percentages against the baseline, the "
                  "durations and the vmstat totals (docs/results.md gives every formula).",
                  "  numasim compare off/ on/ --baseline off\n  numasim compare base=results/a new=results/b --json",
                  cmd_compare)
    sp.add_argument("results", nargs="+", metavar="RESULT",
                    help="a result JSON, or a directory of them (one column); NAME=PATH names the column")
    sp.add_argument("--baseline", metavar="NAME", help="column the percentages refer to (default: the first)")
    sp.add_argument("--ddof", type=int, choices=[0, 1], default=1,
                    help="Stddev divisor n-ddof: 1 as current mmtests (default), 0 as the 2015 reports")
    sp.add_argument("--json", action="store_true", help="print the same numbers as JSON")
    sp.add_argument("--allow-incomplete", action="store_true", help=INCOMPLETE_HELP)
    sp.add_argument("--allow-mismatch", action="store_true", help=MISMATCH_HELP)

    sp = command(sub, "plot", "plot saved results (PNG and SVG)",
                 "Plot saved results: memory per node over time, the rates of hint faults, "
                 "migrations, TLB shootdowns and PTE updates, each thread's nodes, page "
                 "placement over the address space, and, on a machine with memory tiers, "
                 "memory per tier and the promotion and demotion rates.",
                 "  numasim plot on/ --out img/", cmd_plot)
    sp.add_argument("results", nargs="+", metavar="RESULT", help="a result JSON or a directory of them")
    sp.add_argument("--out", required=True, metavar="DIR", help="directory for the images")
    sp.add_argument("--allow-incomplete", action="store_true", help=INCOMPLETE_HELP)

    sp = command(sub, "report", "write one self-contained HTML page: tables, plots, scenarios",
                 "Write DIR/index.html: the comparison tables (as `compare`), the plots embedded "
                 "in the page, and each column's scenario with what differs between columns.",
                 "  numasim report off/ on/ --out report/ --title 'numa01, balancing off vs on'",
                 cmd_report)
    sp.add_argument("results", nargs="+", metavar="RESULT",
                    help="a result JSON, or a directory of them (one column); NAME=PATH names the column")
    sp.add_argument("--out", required=True, metavar="DIR", help="directory for index.html")
    sp.add_argument("--baseline", metavar="NAME", help="column the percentages refer to (default: the first)")
    sp.add_argument("--title", help="the page's title (default: numasim report)")
    sp.add_argument("--ddof", type=int, choices=[0, 1], default=1,
                    help="Stddev divisor n-ddof: 1 as current mmtests (default), 0 as the 2015 reports")
    sp.add_argument("--allow-incomplete", action="store_true", help=INCOMPLETE_HELP)
    sp.add_argument("--allow-mismatch", action="store_true", help=MISMATCH_HELP)

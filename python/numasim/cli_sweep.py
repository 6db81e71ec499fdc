"""`numasim sweep` (run a sweep spec, `sweep plot` a dataset) and `numasim tune` on the
command line (docs/sweeps.md)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from numasim.scenario import UsageError

SPEC_HELP = "sweep spec (TOML): [base], [axes], [[points]] (docs/sweeps.md)"
DASK_HELP = ("run on the Dask scheduler at ADDRESS (tcp://host:8786), or `local` for a LocalCluster "
             "of --jobs worker processes; needs the sweep extra (pip install 'numasim[sweep]')")


def expand(argv: list) -> list:
    """`numasim sweep SPEC.toml ...` is short for `numasim sweep run SPEC.toml ...`."""
    if len(argv) > 1 and argv[0] == "sweep" and argv[1] not in ("run", "plot", "-h", "--help"):
        return ["sweep", "run", *argv[1:]]
    return argv


def _status(args, title: str):
    from numasim.cli_reports import runs_status

    return runs_status(args, title)


def default_out(spec: str) -> Path:
    return Path(Path(spec).stem + ".parquet")


def cmd_sweep_run(args) -> int:
    from numasim import sweeps
    from numasim.cli_reports import EXIT_INCOMPLETE
    from numasim.outpaths import check_output

    out = Path(args.out) if args.out else default_out(args.spec)
    check_output(out, "dir", "--out")
    spec, points, todo = sweeps.plan(args.spec, out)
    where = ("on a local Dask cluster" if args.dask == "local" else f"on {args.dask}") if args.dask else "locally"
    print(f"sweep {args.spec}: {len(points)} points; {len(todo)} to run {where}, "
          f"{len(points) - len(todo)} already in {out}", file=sys.stderr)
    df = sweeps.sweep(spec, out, dask=args.dask, jobs=args.jobs, status=_status(args, f"sweep {Path(args.spec).name}"))
    print(f"{out}: {len(df)} rows, one per point (pandas.read_parquet('{out}'); numasim sweep plot {out} --x AXIS)")
    incomplete = int((~df["completed"]).sum())
    if incomplete:
        print(f"warning: {incomplete} points stopped at run.max_sim_s before their workloads finished "
              "(completed = false: their times are the limit; raise run.max_sim_s)", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


def cmd_sweep_plot(args) -> int:
    from numasim.outpaths import check_output
    from numasim.sweep_plot import plot_dataset

    out = Path(args.out) if args.out else Path(Path(args.dataset).stem + ".png")
    check_output(out, "file", "--out")
    print(plot_dataset(args.dataset, out, args.x, args.y, args.hue, args.z, args.allow_incomplete))
    return 0


def _tune_spec(args):
    from numasim.scenario import parse_set

    if (args.spec is None) == (args.workload is None):
        raise UsageError("give a spec file or --workload NAME (not both)")
    overrides = dict(parse_set(s) for s in args.set or [])
    if args.workload is not None:
        return {"base": {"workload": args.workload, "set": overrides}}
    from numasim.scenario import load_scenario

    if "base" not in load_scenario(args.spec):  # a scenario file, not a spec: tune it as it is
        return {"base": {"scenario": args.spec, "set": overrides}}
    if overrides:
        raise UsageError("--set goes with --workload or a scenario file; a spec sets keys in [base.set]")
    return args.spec


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def tune_table(res: dict) -> str:
    from numasim.cli import _table

    d, b = res["default"], res["best"]
    lines = [f"{res['direction']} {res['objective']}" + (f" subject to {', '.join(res['constraints'])}"
             if res["constraints"] else "") + f"; {len(res['trials'])} trials, seeds {', '.join(map(str, res['seeds']))}", ""]
    rows = [[k, _fmt(d["params"][k]), _fmt(b["params"][k]) if b else "-"] for k in res["knobs"]]
    lines += [_table(rows, ["knob", "default", "best"]), ""]
    rows = []
    for m, v in d["metrics"].items():
        bv = b["metrics"][m] if b else None
        change = f"{100 * (bv - v) / v:+.1f}%" if b and v else "-"
        bound = "; ".join(f"{op[len(m) + 1:]} {_fmt(x)}" for op, x in res["bounds"].items() if op.split()[0] == m)
        rows.append([m + (" (objective)" if m == res["objective"] else ""), _fmt(v), _fmt(bv), change, bound])
    lines += [_table(rows, ["metric (mean over seeds)", "default", "best", "change", "constraint"]), ""]
    feasible = sum(t["feasible"] for t in res["trials"])
    if b is None:
        lines.append(f"no trial met the constraints ({feasible} of {len(res['trials'])} feasible)")
    elif b["params"] == d["params"]:
        lines.append(f"no setting beat the default ({feasible} of {len(res['trials'])} trials feasible)")
    else:
        lines.append(f"best: trial {b['trial']} ({feasible} of {len(res['trials'])} trials feasible); as overrides:")
        lines.append("  " + " ".join(f"--set {k}={v}" for k, v in b["params"].items()))
    return "\n".join(lines)


def cmd_tune(args) -> int:
    import numasim

    seeds = None
    if args.seeds:
        try:
            seeds = [int(s) for s in args.seeds.split(",")]
        except ValueError:
            raise UsageError(f"--seeds {args.seeds}: give integers separated by commas, e.g. 1,2,3") from None
    res = numasim.tune(_tune_spec(args), minimize=args.minimize, maximize=args.maximize,
                       constraints=args.constraint, trials=args.trials, seeds=seeds, sampler_seed=args.sampler_seed,
                       dask=args.dask, jobs=args.jobs, status=None if args.json else _status(args, "tune"))
    print(json.dumps(res, indent=1) if args.json else tune_table(res))
    return 0


def register(sub, command) -> None:
    """Add `sweep` (run, plot) and `tune` to the command line (``command``: cli_parser._command)."""
    from numasim.cli_parser import JOBS_HELP, SET_HELP

    sp = command(sub, "sweep", "run a grid of scenarios (local processes or Dask) into a Parquet dataset",
                 "Run every point of a sweep spec: a base scenario (a file, a built-in workload or one run of "
                 "an experiment) and axes over scenario keys (--set paths, kernel versions, features, "
                 "machine profiles, seeds), as a full grid or listed points. `numasim sweep SPEC.toml` is "
                 "short for `numasim sweep run SPEC.toml`; `numasim sweep plot` draws a dataset.",
                 "  numasim sweep knobs.toml --dask local\n  numasim sweep plot knobs.parquet --x scan_delay_ms --hue kernel",
                 None)
    ssub = sp.add_subparsers(dest="sweep_command", required=True, metavar="ACTION")
    fmt = argparse.RawDescriptionHelpFormatter

    rp = ssub.add_parser("run", help="run a sweep spec (the default action)", formatter_class=fmt,
                         description=textwrap.fill(
                             "Run every point of SPEC.toml not yet in the dataset, on local processes or a Dask "
                             "cluster, and append one row per finished point (axis values, completed, times, "
                             "counters, scenario hash, numasim version) to the Parquet dataset --out. Run it "
                             "again after an interruption: only the missing points run.", 88),
                         epilog="example:\n  numasim sweep run knobs.toml --out knobs.parquet --jobs 2"
                                "\n  numasim sweep knobs.toml --dask tcp://scheduler:8786   # `run` may be left out")
    rp.add_argument("spec", metavar="SPEC.toml", help=SPEC_HELP)
    rp.add_argument("--out", "-o", metavar="DIR", help="the dataset directory (default: SPEC's name + .parquet, here)")
    rp.add_argument("--dask", metavar="ADDRESS", help=DASK_HELP)
    rp.add_argument("--jobs", "-j", type=int, metavar="J", help=JOBS_HELP + "; with --dask local: the workers")
    rp.set_defaults(func=cmd_sweep_run)

    pp = ssub.add_parser("plot", help="plot a sweep dataset: lines, or a heatmap over two axes", formatter_class=fmt,
                         description=textwrap.fill(
                             "Plot a metric of a sweep dataset against an axis (--x), a line per value of "
                             "--hue; rows sharing those values (other axes, seeds) are averaged, the band "
                             "is their min-max. With --y AXIS: a heatmap of --z METRIC over two axes. An axis "
                             "may be named by its last dotted part.", 88),
                         epilog="example:\n  numasim sweep plot knobs.parquet --x scan_delay_ms --y system_s --hue kernel"
                                "\n  numasim sweep plot knobs.parquet --x scan_delay_ms --y scan_period_min_ms --z system_s")
    pp.add_argument("dataset", metavar="DATASET", help="a sweep's dataset directory")
    pp.add_argument("--x", required=True, metavar="AXIS", help="the axis along x")
    pp.add_argument("--y", metavar="METRIC|AXIS", help="the metric to draw (default elapsed_s), or an axis for a heatmap")
    pp.add_argument("--hue", metavar="AXIS", help="a line per value of this axis")
    pp.add_argument("--z", metavar="METRIC", help="the heatmap's colour (default elapsed_s)")
    pp.add_argument("--out", "-o", metavar="FILE", help="image file, .png or .svg (default: DATASET's name + .png, here)")
    pp.add_argument("--allow-incomplete", action="store_true",
                    help="draw points that stopped at run.max_sim_s (the title says how many)")
    pp.set_defaults(func=cmd_sweep_plot)

    tp = command(sub, "tune", "search the NUMA-balancing scan sysctls for an objective under constraints",
                 "Search the kernel's NUMA-balancing knobs (the scan sysctls, or [tune.knobs] of a spec) with "
                 "Optuna's TPE sampler for an objective under constraints, e.g. the least system_s with "
                 "elapsed_s within 2% of the default; the trials run as sweep points (local processes or "
                 "Dask). Prints the best settings beside the default's figures; the default is the first "
                 "trial, so the best is never worse.",
                 "  numasim tune --workload numa02 --minimize system_s --constraint 'elapsed_s <= default+2%'\n"
                 "  numasim tune tune.toml --trials 50 --dask local --jobs 4", cmd_tune)
    tp.add_argument("spec", nargs="?", metavar="SPEC.toml",
                    help="a spec with [base] and an optional [tune] table, or a scenario file to tune as it is")
    tp.add_argument("--workload", "-w", help="tune this built-in workload instead of a spec's base (balancing on)")
    tp.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP + "; with --workload or a scenario file")
    tp.add_argument("--minimize", metavar="METRIC", help="the objective: elapsed_s, system_s, a counter, ...")
    tp.add_argument("--maximize", metavar="METRIC", help="the objective, to maximise (e.g. hint_local_pct)")
    tp.add_argument("--constraint", action="append", metavar="EXPR",
                    help="METRIC <= BOUND or >= BOUND; BOUND a number, default, default+N%% or default-N%% (repeatable)")
    tp.add_argument("--trials", type=int, metavar="N", help="trials to run, 1..10000 (default 20)")
    tp.add_argument("--seeds", metavar="S,S,...", help="seeds each trial runs, its figures their mean (default 1)")
    tp.add_argument("--sampler-seed", type=int, metavar="N", help="the sampler's seed (default 1): the same search again")
    tp.add_argument("--dask", metavar="ADDRESS", help=DASK_HELP)
    tp.add_argument("--jobs", "-j", type=int, metavar="J", help=JOBS_HELP + "; also the trials asked at once")
    tp.add_argument("--json", action="store_true", help="print the default, the best and every trial as JSON")

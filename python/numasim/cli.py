"""The `numasim` command line.

User errors (bad scenario, missing file, host too small) print one
`error: <loc>: <msg>` line each and exit 2; engine bugs exit 1. A run that stopped at
run.max_sim_s before its workloads finished prints a `warning:` line and exits 3.
Set NUMASIM_BACKTRACE=1 to get the Python traceback as well. The parser and every command's
help are in cli_parser.py.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import numasim
from numasim.exceptions import InternalError, NumasimError, error_list
from numasim.outpaths import check_output
from numasim.textfile import check_utf8_args
from numasim.scenario import DEFAULT_MACHINE, UsageError, parse_set, scenario_toml

TABLE_COUNTERS = [
    "numa_pte_updates",
    "numa_huge_pte_updates",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
    "pgmigrate_success",
    "pgmigrate_fail",
    "numa_hit",
    "numa_miss",
    "numa_local",
    "numa_other",
    "pgfault",
    "nr_tlb_remote_flush",
    "nr_tlb_remote_flush_received",
]


def _table(rows, head=None) -> str:
    rows = [[str(c) for c in r] for r in rows]
    if head:
        rows = [list(head)] + rows
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if head:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---------------------------------------------------------------- run


def _scenario_text(args) -> str:
    if args.scenario is None and args.workload is None:
        raise UsageError("give a scenario file or --workload NAME")
    overrides = [parse_set(s) for s in args.set or []]
    balancing = args.balancing
    if args.scenario is None and balancing is None:
        balancing = "on"  # the --workload shortcut defaults to balancing on
    return scenario_toml(
        args.scenario, workload=args.workload, machine=args.machine,
        balancing=balancing, seed=args.seed, overrides=overrides,
    )


def check_jobs_and_iterations(args) -> None:
    """--iterations and --jobs in bounds (UsageError), a warning when jobs exceed the CPUs."""
    from numasim.repeat import check_iterations, check_jobs, cpu_cores, default_jobs

    check_iterations(args.iterations)
    args.jobs = check_jobs(default_jobs() if args.jobs is None else args.jobs)
    if args.jobs > cpu_cores():
        print(f"warning: --jobs {args.jobs} is more than the {cpu_cores()} CPUs this process may use: "
              "the runs will share them", file=sys.stderr)


def cmd_run(args) -> int:
    from numasim import cli_reports

    check_jobs_and_iterations(args)
    if args.save:
        check_output(args.save, "dir" if args.iterations != 1 else "file", "--save")
    if args.trace:
        _check_trace_option(args)
    text = _scenario_text(args)
    if args.iterations != 1:
        return cli_reports.run_iterations(text, args)
    result = cli_reports.run_single(text, args)  # progress bar on a terminal; --save + Parquet
    trace_lines = _write_run_trace(result, args) if args.trace else []
    if args.json:
        print(result.to_json())
        if trace_lines:
            print("\n".join(trace_lines), file=sys.stderr)  # stdout holds the JSON alone
        return cli_reports.warn_incomplete([result])
    from numasim.result import numa_balancing_label

    sc = result.scenario
    m = sc.get("machine", {})
    workloads = sc.get("workloads") or sc.get("workload") or []
    kinds = ", ".join(w.get("kind", "?") for w in workloads)
    print(f"{kinds} on {m.get('name') or m.get('profile') or 'custom machine'}: "
          f"numa_balancing={numa_balancing_label(sc)}, seed={result.seed}")
    if not result.completed:
        print(f"INCOMPLETE: {result.incomplete_message()}")
    print()
    print(_table([[key, f"{float(v):.3f}"] for key, v in result.times.items()], ["time", "seconds"]))
    print()
    c = result.counters
    names = [n for n in TABLE_COUNTERS if n in c] + sorted(n for n in c if n not in TABLE_COUNTERS)
    rows = [[n, c[n]] for n in names]
    rows.append(["hint local % (all)", f"{result.hint_local_percent():.1f}"])
    rows.append(["hint local % (last 10%)", f"{result.hint_local_percent(0.1):.1f}"])
    print(_table(rows, ["vmstat", "value"]))
    print_numastat(result)
    if trace_lines:
        print()
        print("\n".join(trace_lines))
    return cli_reports.warn_incomplete([result])


# ---------------------------------------------------------------- traces


def _check_trace_option(args) -> None:
    """`run --trace FILE`: one run, a writable .json(.gz) name apart from --save; sets run.trace."""
    from pathlib import Path

    from numasim.trace_export import trace_paths

    if args.iterations != 1:
        raise UsageError("--trace records one run; drop --iterations")
    trace_file, table = trace_paths(args.trace, "--trace")
    check_output(trace_file, "file", "--trace")
    if args.save and Path(args.save).resolve() in (trace_file.resolve(), table.resolve()):
        raise UsageError(f"--trace {args.trace}: the same file as --save {args.save}; give another name")
    args.set = [*(args.set or []), "run.trace=true"]


def _trace_written(paths: tuple) -> list:
    """The lines that say where a trace and its table went."""
    trace_file, table = paths
    lines = [f"trace: {trace_file} (open it in ui.perfetto.dev or chrome://tracing)"]
    if table is not None:
        lines.append(f"table: {table} (pandas.read_parquet)")
    return lines


def _warn_dropped(result) -> None:
    """A `warning:` line for each traced list the engine cut short."""
    from numasim.trace_export import dropped

    for name, n in dropped(result).items():
        print(f"warning: the trace holds only part of {name}: {n} entries were dropped", file=sys.stderr)


def _write_run_trace(result, args) -> list:
    from numasim.trace_export import write_trace

    paths = write_trace(result, args.trace, option="--trace", what="the run")
    _warn_dropped(result)
    return _trace_written(paths)


def cmd_trace(args) -> int:
    """`numasim trace RESULT.json --out FILE`."""
    from numasim.trace_export import load_result_json, write_trace

    raw = load_result_json(args.result)
    out = args.out or _default_trace_name(args.result)
    paths = write_trace(raw, out, option="--out", what=args.result)
    _warn_dropped(raw)
    print("\n".join(_trace_written(paths)))
    return 0


def _default_trace_name(result_path: str) -> str:
    """RESULT.json -> RESULT.trace.json, beside it."""
    return result_path.removesuffix(".json") + ".trace.json"


def print_numastat(result) -> None:
    """The per-node views of `numastat` and `numastat -p` (numastat.py)."""
    from numasim import numastat

    mem = result.process_memory()
    if len(mem):
        print()
        print(numastat.process_memory_text(mem))
    counters = result.numastat()
    if counters is not None:
        print()
        print("numastat (allocations, per node: /sys/devices/system/node/nodeN/numastat)")
        print(numastat.counters_text(counters))


# ---------------------------------------------------------------- reproduce


def cmd_reproduce(args) -> int:
    from numasim import experiments

    if args.list or not args.name:
        for n in experiments.names():
            print(f"{n}: {experiments.get(n).description}")
        return 0
    check_jobs_and_iterations(args)
    if args.name == "all":
        from numasim.cli_reports import reproduce_all

        if args.iterations != 1:
            raise UsageError("reproduce all takes no --iterations; give one experiment's name")
        return reproduce_all(args, [parse_set(s) for s in args.set or []])
    try:
        exp = experiments.get(args.name)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    overrides = [parse_set(s) for s in args.set or []]
    if args.iterations != 1:
        from numasim.cli_reports import reproduce_iterations

        return reproduce_iterations(exp, args, overrides)
    from numasim.cli_reports import reproduce_one

    res = reproduce_one(exp, args, overrides)
    print(res.to_json() if args.json else res.to_table())
    return 1 if args.strict and not res.passed else 0


# ---------------------------------------------------------------- bench

BENCH_WORKLOADS = ["numa01", "numa01-traced", "numa02", "delay-mapping", "numa01-mthp16k", "kvm-pinned-4k", "memory-tiering"]


def _bench_scenario(workload: str) -> tuple:
    """(machine, TOML): autonuma tests on the default machine; `delay-mapping` is that
    experiment's patched run at the changelog's scale (70 GiB, 64 threads, 60 s timed loop);
    `numa01-mthp16k` is mthp-numa's patched numa01 with 16K mTHP (6.10, PMD THP never);
    `kvm-pinned-4k` is kvm-pinned's base run of the fully pinned 4 KiB guest (every scan chunk
    zaps 64K SPTEs that the 32 vCPUs refault); `memory-tiering` is that example (promotion
    from PMEM and demotion by kswapd, numa_balancing = 2); `numa01-traced` is numa01 with
    `run.trace` (docs/traces.md): its speed beside numa01's is what tracing costs."""
    if workload == "numa01-traced":
        return DEFAULT_MACHINE, scenario_toml(workload="numa01", machine=DEFAULT_MACHINE, balancing=True, overrides=[("run.trace", True)])
    if workload == "memory-tiering":
        from numasim import examples

        return "intel-2s-dram-pmem", examples.path(workload).read_text(encoding="utf-8")
    if workload == "kvm-pinned-4k":
        from numasim.experiments.kvm_pinned import MACHINE, scenario
        from numasim.scenario import to_toml

        return MACHINE, to_toml(scenario("never", 1.0, "base"))
    if workload == "numa01-mthp16k":
        from numasim.experiments.mthp_numa import MACHINE, scenario
        from numasim.scenario import to_toml

        return MACHINE, to_toml(scenario("16K", "numa01", "patched"))
    if workload == "delay-mapping":
        from numasim.experiments.tlb_flush import MACHINE, delay_mapping_scenario
        from numasim.scenario import to_toml

        return MACHINE, to_toml(delay_mapping_scenario("patched"))
    return DEFAULT_MACHINE, scenario_toml(workload=workload, machine=DEFAULT_MACHINE, balancing=True)


def _proc_status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _bench_run(text: str) -> tuple:
    """Worker (a fresh process per run): (wall s, CPU s, peak RSS bytes the run added to the
    process, result JSON). Linux: the peak (VmHWM) is reset to the current RSS before the run
    (clear_refs 5) and read after it; elsewhere ru_maxrss (whose earlier peak may hide it)."""
    import resource

    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        base = _proc_status_kib("VmRSS")
    except OSError:
        base = None
    if base is None:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    r = numasim.run(text)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _proc_status_kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return wall, cpu, max(peak - base, 0) * 1024, r.to_json()


def touched_pages(r) -> int:
    """The most pages the processes held at once (series.memory summed per sample)."""
    m = r.memory
    return int(m.groupby("time_s")["pages"].sum().max()) if len(m) else 0


def bench_one(workload: str, repeat: int = 1) -> dict:
    """Run `workload` `repeat` times, each in a fresh process (so that its peak RSS is its own);
    report the fastest wall and CPU times (as timeit does: on a shared host the minimum is the
    run least disturbed by other work) and the smallest peak RSS added by the run."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from numasim.result import Result

    machine, text = _bench_scenario(workload)
    walls, cpus, rss = [], [], []
    for _ in range(repeat):
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
            wall_, cpu_, rss_, raw = ex.submit(_bench_run, text).result()
        walls.append(wall_)
        cpus.append(cpu_)
        rss.append(rss_)
    r = Result(raw)
    wall, cpu = min(walls), min(cpus)
    trace_bytes = None
    if "trace" in r.raw:
        from numasim.trace_export import dumps, to_trace_events

        trace_bytes = len(dumps(to_trace_events(r.raw)).encode())
    pages = touched_pages(r)
    ev = r.sim.get("events", {})
    events = sum(int(ev.get(k, 0)) for k in ("pte_updates", "hint_faults", "migrations"))
    # a guest's secondary-MMU work: SPTEs zapped and EPT violations
    events += sum(int(vm["stats"].get(k, 0)) for vm in r.raw.get("kvm", []) for k in ("sptes_zapped", "ept_violations"))
    return {
        "workload": workload,
        "machine": machine,
        "sim_s": r.elapsed_s,
        "repeat": repeat,
        "wall_s": wall,
        "wall_s_all": walls,
        "cpu_s": cpu,
        "x_real_time": r.elapsed_s / wall if wall > 0 else None,
        "x_real_time_cpu": r.elapsed_s / cpu if cpu > 0 else None,
        "numa_events": events,
        "events_per_wall_s": events / wall if wall > 0 else None,
        "ticks": r.sim.get("ticks"),
        "peak_rss_bytes": min(rss),
        "touched_pages": pages,
        "rss_bytes_per_page": min(rss) / pages if pages else None,
        "trace_bytes": trace_bytes,
    }


def bench_compare(runs: list, ref_path: str) -> list:
    """Rows of x real time and RSS per page against a saved `bench --json` (REF): the ratio
    new / REF per workload both have. Both should come from the same host."""
    with open(ref_path, encoding="utf-8") as f:
        ref = {r["workload"]: r for r in json.load(f)["runs"]}
    rows = []
    for r in runs:
        old = ref.get(r["workload"])
        if old is None:
            continue
        ratio = lambda k: (r[k] / old[k]) if r.get(k) and old.get(k) else None  # noqa: E731
        rows.append({"workload": r["workload"], "x_real_time": r["x_real_time"], "ref_x_real_time": old.get("x_real_time"),
                     "speed_ratio": ratio("x_real_time"), "rss_per_page_ratio": ratio("rss_bytes_per_page"),
                     "same_sim_s": r["sim_s"] == old.get("sim_s")})
    return rows


def cmd_bench(args) -> int:
    names = args.only or BENCH_WORKLOADS
    if not 1 <= args.repeat <= 100:
        print(f"error: --repeat must be in 1..100, got {args.repeat}", file=sys.stderr)
        return 2
    if args.compare:
        try:
            with open(args.compare, encoding="utf-8") as f:
                json.load(f)["runs"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"error: --compare {args.compare}: not a saved `numasim bench --json` ({e})", file=sys.stderr)
            return 2
    runs = []
    for w in names:
        runs.append(bench_one(w, args.repeat))
        if not args.json:
            print(f"  {w}: done in {runs[-1]['wall_s']:.2f} s wall", file=sys.stderr)
    compared = bench_compare(runs, args.compare) if args.compare else None
    if args.json:
        out = {"numasim_version": numasim.__version__, "runs": runs}
        if compared is not None:
            out["compare"] = {"ref": args.compare, "rows": compared}
        print(json.dumps(out, indent=1))
        return 0
    head = ["workload", "sim_s", "wall_s", "x real time", "cpu_s", "x real time (CPU)", "NUMA events/wall s", "ticks",
            "peak RSS MiB", "bytes/page", "trace MiB"]
    rows = [[r["workload"], f"{r['sim_s']:.2f}", f"{r['wall_s']:.2f}", f"{r['x_real_time']:.1f}",
             f"{r['cpu_s']:.2f}", f"{r['x_real_time_cpu']:.1f}", f"{r['events_per_wall_s']:.3g}", r["ticks"],
             f"{r['peak_rss_bytes'] / 2**20:.0f}", f"{r['rss_bytes_per_page']:.1f}" if r["rss_bytes_per_page"] else "-",
             f"{r['trace_bytes'] / 2**20:.1f}" if r.get("trace_bytes") else "-"]
            for r in runs]
    print(_table(rows, head))
    if compared is not None:
        print(f"\nagainst {args.compare} (new / saved; run both on the same host):")
        print(_table([[c["workload"], f"{c['speed_ratio']:.3f}" if c["speed_ratio"] else "-",
                       f"{c['rss_per_page_ratio']:.3f}" if c["rss_per_page_ratio"] else "-",
                       "yes" if c["same_sim_s"] else "NO"] for c in compared],
                     ["workload", "speed ratio", "RSS/page ratio", "same sim_s"]))
    return 0


# ---------------------------------------------------------------- info


def provenance(profile_text: str) -> list:
    """Summary lines of a profile's [source] table: constants per kind, and the experiments a
    `derived` constant was fitted to (their figures are in-sample)."""
    from numasim.scenario import tomllib

    src = tomllib.loads(profile_text).get("source", {})
    kinds: dict = {}
    for key, v in src.items():
        kinds.setdefault(v.split(":", 1)[0].strip(), []).append(key)
    lines = ["# provenance: " + ", ".join(f"{len(kinds.get(k, []))} {k}"
                                          for k in ("spec", "measured", "derived", "assumed"))]
    for key in kinds.get("derived", []):
        lines.append(f"#   derived {key}: {src[key].split(':', 1)[1].strip()}")
    return lines


def cmd_machines(args) -> int:
    if args.show:
        text = numasim.machine_profile_toml(args.show)
        print(text, end="")
        print("\n".join(provenance(text)))
        return 0
    for name in numasim.machine_profiles():
        mark = "  (default)" if name == DEFAULT_MACHINE else ""
        print(f"{name}{mark}")
    return 0


def cmd_features(args) -> int:
    feats = numasim.features()
    if args.json:
        print(json.dumps(feats, indent=1))
        return 0
    rows = [[f["name"], f.get("since", ""), f.get("until", ""), f.get("seed", ""),
             "yes" if f.get("modelled") else "no", "on" if f.get("default") else "off",
             f.get("summary", "")] for f in feats]
    print(_table(rows, ["name", "since", "until", "seed", "modelled", "default", "summary"]))
    return 0


def cmd_kernels(args) -> int:
    if not args.show:
        versions = numasim.kernel_versions()
        default = next(v for v in versions if numasim.kernel_profile(v)["default"])
        if args.json:
            print(json.dumps({"versions": versions, "default": default}, indent=1))
            return 0
        for v in versions:
            print(f"{v}  (default)" if v == default else v)
        return 0
    try:
        prof = numasim.kernel_profile(args.show)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(prof, indent=1))
        return 0
    print(f"kernel {prof['version']}" + ("  (default)" if prof["default"] else ""))
    print()
    rows = [[m["mechanism"], m["variant"], m["commit"] or "-", m["since"] or "-",
             m["summary"] + ("" if m["checked"] else " (commit not verified)")] for m in prof["mechanisms"]]
    print(_table(rows, ["mechanism", "variant", "commit", "since", "summary"]))
    print()
    print(_table([[name, "on" if on else "off"] for name, on in prof["features"].items()], ["feature", "value"]))
    return 0


def _pretty(v, indent: int = 0) -> str:
    """JSON with tables indented and lists of scalars kept on one line."""
    pad = "  " * (indent + 1)
    if isinstance(v, dict) and v:
        items = [f"{pad}{json.dumps(k)}: {_pretty(x, indent + 1)}" for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(v, list) and any(isinstance(x, (dict, list)) and x for x in v):
        items = [pad + _pretty(x, indent + 1) for x in v]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    return json.dumps(v)


def cmd_scenario_show(args) -> int:
    from numasim.scenario_show import resolved_toml

    overrides = [parse_set(s) for s in args.set or []]
    resolved = numasim.resolve(scenario_toml(args.file, overrides=overrides))
    print(_pretty(resolved) if args.json else resolved_toml(resolved), end="\n" if args.json else "")
    return 0


# ---------------------------------------------------------------- parser


def build_parser():
    from numasim.cli_parser import build_parser as build

    return build({"run": cmd_run, "reproduce": cmd_reproduce, "bench": cmd_bench,
                  "machines": cmd_machines, "features": cmd_features, "kernels": cmd_kernels, "scenario": cmd_scenario_show,
                  "trace": cmd_trace})


def _error(loc: str, msg: str) -> None:
    msg = " ".join(part.strip() for part in msg.splitlines() if part.strip())  # one line each
    print(f"error: {loc}: {msg}" if loc else f"error: {msg}", file=sys.stderr)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Python warnings (e.g. Parquet sidecars skipped) as one `warning:` line each."""
    print(f"warning: {message}", file=sys.stderr)


def main(argv=None) -> int:
    from numasim.cli_sweep import expand

    argv = expand(sys.argv[1:] if argv is None else list(argv))
    args = build_parser().parse_args(argv)
    warnings.showwarning = _show_warning
    try:
        check_utf8_args(argv)
        return args.func(args) or 0
    except UsageError as exc:  # a NumasimError without a location
        _error("", str(exc))
        return 2
    except NumasimError as exc:  # Scenario/Capacity/Simulation: 2; Internal: 1
        if os.environ.get("NUMASIM_BACKTRACE"):
            raise
        for e in error_list(exc):
            _error(e["loc"], e["msg"])
        if isinstance(exc, InternalError):
            print("error: this is a numasim bug; NUMASIM_BACKTRACE=1 shows more", file=sys.stderr)
            return 1
        return 2
    except FileNotFoundError as exc:
        _error(exc.filename or "", "no such file")
        return 2
    except IsADirectoryError as exc:
        _error(exc.filename or "", "is a directory, not a scenario file")
        return 2
    except BrokenPipeError:  # `numasim ... | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # e.g. the disk filled up while saving
        _error(exc.filename or "", exc.strerror or str(exc))
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

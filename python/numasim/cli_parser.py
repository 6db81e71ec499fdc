"""The `numasim` argument parser: every command and option with its help, each command with
what it does and an example (`numasim COMMAND --help`). cli.py supplies the handlers."""

from __future__ import annotations

import argparse
import textwrap

from numasim.scenario import DEFAULT_MACHINE

DESCRIPTION = """\
numasim simulates Linux automatic NUMA balancing (kernel.numa_balancing) on a modelled
NUMA machine: the PTE scanner, NUMA hint faults, page migration, the scan-period feedback
and the TLB shootdowns they cause, under workloads such as autonuma-benchmark, pmbench,
memory eaters and migratepages loops. The same scenario and seed always give a
bit-identical result; counters carry the kernel's /proc/vmstat names.

A scenario is a TOML file (docs/scenario.md; `numasim examples` has some to start from).
`numasim COMMAND --help` describes a command, with an example."""

EPILOG = """\
examples:
  numasim run --workload numa02                     # one run, default machine, balancing on
  numasim examples copy four-node-mix && numasim run four-node-mix.toml
  numasim run my.toml --iterations 3 --save on/     # a group of seeded runs
  numasim compare off/ on/                          # mmtests compare-kernels tables
  numasim reproduce --list                          # the shipped experiments

Invalid input prints `error: <where>: <what>` and exits 2; an engine bug exits 1; a run
that stopped at run.max_sim_s before its workloads finished exits 3."""

JOBS_HELP = "parallel processes, 1..64 (default 2, or 1 on a single-CPU host); more than the CPUs warns"
SET_HELP = ("override a scenario key, dotted (workload.size_mib=64, workload.1.threads=4, "
            "machine.cpus_per_node=8); the value is TOML, else a string (repeatable)")


def _command(sub, name: str, help: str, description: str, example: str, func) -> argparse.ArgumentParser:
    """A subcommand whose --help says what it does and shows an example."""
    sp = sub.add_parser(name, help=help, description=textwrap.fill(description, 88),
                        epilog="example:\n" + example,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.set_defaults(func=func)
    return sp


def build_parser(handlers: dict) -> argparse.ArgumentParser:
    """The parser; ``handlers`` maps command names to functions of the parsed args."""
    import numasim

    p = argparse.ArgumentParser(prog="numasim", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"numasim {numasim.__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sp = _command(sub, "run", "run one scenario (or N seeded iterations) and print its counters",
                  "Run a scenario and print its times, /proc/vmstat counters and per-node memory "
                  "(numastat); --json prints the whole result, --save writes it with Parquet "
                  "sidecars. A progress bar shows on a terminal.",
                  "  numasim run --workload numa02 --balancing off --seed 2\n"
                  "  numasim run my.toml --set workload.size_mib=64 --save r.json", handlers["run"])
    sp.add_argument("scenario", nargs="?", help="scenario TOML file (or give --workload)")
    sp.add_argument("--workload", "-w", help="workload kind, e.g. numa02 (replaces the file's workloads)")
    sp.add_argument("--machine", "-m", help=f"machine profile (default {DEFAULT_MACHINE}; numasim machines)")
    sp.add_argument("--balancing", choices=["on", "off"], help="kernel.numa_balancing (default on)")
    sp.add_argument("--seed", type=int, metavar="N",
                    help="seed of the run's random streams (the scenario's, or 1); with --iterations the first seed")
    sp.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    sp.add_argument("--json", action="store_true", help="print the result JSON instead of the tables")
    sp.add_argument("--save", metavar="PATH",
                    help="also write the result JSON (+ Parquet sidecars) to PATH; a directory with --iterations")
    sp.add_argument("--iterations", "-n", type=int, default=1, metavar="N",
                    help="run N times (1..100) with seeds seed, seed+1, ... and summarise them as one column")
    sp.add_argument("--jobs", "-j", type=int, metavar="J", help=JOBS_HELP)
    sp.add_argument("--trace", metavar="FILE",
                    help="record the run's events (run.trace = true) and write them to FILE (.json, or .json.gz), "
                         "a Trace Event file ui.perfetto.dev opens, and a table beside it (.parquet; docs/traces.md)")

    sp = _command(sub, "trace", "write a saved result's traced events for Perfetto and pandas",
                  "Convert a saved result with trace data (a run with --trace, run.trace or run.trace_faults, or a "
                  "VM's vm.json from `numasim validate --trace-faults`) into a Trace Event JSON file that "
                  "ui.perfetto.dev and chrome://tracing open, and a Parquet table of the same events beside it "
                  "(docs/traces.md).",
                  "  numasim trace result.json --out trace.json\n"
                  "  numasim trace out/v/reader-writer-4k-6.1/vm.json --out vm-trace.json.gz", handlers["trace"])
    sp.add_argument("result", help="a result JSON (numasim run --save, or a VM's vm.json)")
    sp.add_argument("--out", "-o", metavar="FILE",
                    help="the trace file, .json or .json.gz (default: RESULT's name with .trace.json); "
                         "the table goes beside it as .parquet")

    sp = _command(sub, "reproduce", "run a shipped experiment and check it against its changelog",
                  "Run one of the shipped experiments (each reproduces a kernel changelog's "
                  "measurements) and print its table: simulated values, the changelog's, and the "
                  "checks. `all` runs every experiment and prints the errors against the "
                  "references. A status line on a terminal shows which run of how many is going.",
                  "  numasim reproduce --list\n  numasim reproduce autonuma-balancing --iterations 3",
                  handlers["reproduce"])
    sp.add_argument("name", nargs="?", help="an experiment (see --list), or all")
    sp.add_argument("--list", action="store_true", help="list the experiments")
    sp.add_argument("--json", action="store_true", help="print the rows as JSON")
    sp.add_argument("--jobs", "-j", type=int, metavar="J", help=JOBS_HELP)
    sp.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override applied to every run (results then differ from the reference)")
    sp.add_argument("--strict", action="store_true", help="exit 1 when a check fails")
    sp.add_argument("--iterations", "-n", type=int, default=1, metavar="N",
                    help="run the experiment with seeds 1..N (N in 1..100): mean values, checks must hold in all")

    from numasim.cli_reports import add_parsers as add_report_parsers

    add_report_parsers(sub, _command)  # compare, plot, report

    from numasim.cli import BENCH_WORKLOADS

    sp = _command(sub, "bench", "measure the simulator's speed",
                  "Run benchmark scenarios and report wall and CPU time, simulated seconds per "
                  "wall second and NUMA events per second (docs/performance.md).",
                  "  numasim bench --only numa02 --repeat 3", handlers["bench"])
    sp.add_argument("--json", action="store_true", help="print the measurements as JSON")
    sp.add_argument("--only", action="append", choices=BENCH_WORKLOADS, metavar="WORKLOAD",
                    help=f"bench only this workload (repeatable; one of {', '.join(BENCH_WORKLOADS)})")
    sp.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run each workload N times and report the fastest (default 1)")
    sp.add_argument("--compare", metavar="REF.json",
                    help="also print the speed and RSS-per-page ratios against a saved `bench --json`")

    sp = _command(sub, "machines", "list the built-in machine profiles",
                  "List the built-in machine profiles, or print one as TOML with the source of "
                  "every number. A scenario picks one with [machine] profile = NAME.",
                  "  numasim machines --show intel-4s-48c", handlers["machines"])
    sp.add_argument("--show", metavar="NAME", help="print one profile's TOML")

    sp = _command(sub, "features", "list the kernel changes the engine knows",
                  "List the named kernel changes a scenario can switch in [kernel.features]: the "
                  "release that brought each, its changelog, whether it is modelled, its default.",
                  "  numasim features --json", handlers["features"])
    sp.add_argument("--json", action="store_true", help="print the table as JSON")

    sp = _command(sub, "kernels", "list the kernel versions a scenario may name",
                  "List the kernel releases [kernel] version may name, or with --show V what that "
                  "release runs: the variant of every mechanism whose code changed between "
                  "releases (with the commit that brought it) and every feature.",
                  "  numasim kernels --show 6.1", handlers["kernels"])
    sp.add_argument("--show", metavar="VERSION",
                    help="what that release runs: every mechanism's variant, every feature")
    sp.add_argument("--json", action="store_true", help="print as JSON")

    sp = _command(sub, "scenario", "scenario tools (show)",
                  "Scenario tools. `show` prints a scenario fully resolved, every default filled in.",
                  "  numasim scenario show my.toml > resolved.toml", handlers["scenario"])
    ssub = sp.add_subparsers(dest="scenario_command", required=True, metavar="ACTION")
    ss = ssub.add_parser(
        "show", help="print the fully resolved scenario as TOML that `numasim run` accepts",
        description=textwrap.fill("Print the scenario with every default filled in (the machine written out, "
                    "every feature, variant and workload parameter), as TOML that `numasim run` "
                    "accepts and resolves to the same scenario. --json prints the engine's "
                    "resolved form instead (topology maps, features as booleans).", 88),
        epilog="example:\n  numasim scenario show my.toml --set workload.passes=10 > full.toml\n"
               "  numasim run full.toml",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ss.add_argument("file", help="scenario TOML file")
    ss.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    ss.add_argument("--json", action="store_true", help="the engine's resolved form, as JSON")
    ss.set_defaults(func=handlers["scenario"])

    from numasim import examples

    examples.register(sub, argparse.RawDescriptionHelpFormatter)
    from numasim.realkernel import validate

    validate.register(sub, _command)  # numasim validate, hostrun
    from numasim import fidelity

    fidelity.register(sub, _command)
    from numasim import cli_sweep

    cli_sweep.register(sub, _command)  # numasim sweep (run, plot), tune
    return p

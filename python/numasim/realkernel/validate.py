"""`numasim validate SCENARIO --kernel V`: the same scenario simulated and run on a real
kernel in a QEMU VM, counters side by side.

The simulation runs with the scenario's machine (which for the shipped validation scenarios
is the VM's: 2 nodes x 2 CPUs x 2 GiB, with memory costs measured under TCG) and the kernel
profile matching V (6.1 -> "6.1", 6.12 -> "6.12", 7.3 -> "7.3").
"""

from __future__ import annotations

import copy
import json
import sys
import time
from importlib import resources
from pathlib import Path

import numasim
from numasim.realkernel import compare as cmpmod
from numasim.realkernel.errors import RealKernelError
from numasim.realkernel.kernels import KERNELS, choice
from numasim.scenario import apply_overrides, parse_toml, read_source, to_toml


def shipped() -> list:
    d = resources.files("numasim") / "validation"
    return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".toml"))


def scenario_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.exists():
        return p
    stem = name_or_path[:-5] if name_or_path.endswith(".toml") else name_or_path
    q = Path(str(resources.files("numasim") / "validation" / f"{stem}.toml"))
    if q.exists():
        return q
    raise RealKernelError(f"no scenario file {name_or_path!r} and no shipped validation scenario of that name "
                          f"(shipped: {', '.join(shipped())})", loc=name_or_path)


def scenario_dict(name_or_path: str, kernel: str, overrides=None) -> dict:
    """The scenario as the simulation side runs it: the kernel profile matching `kernel`, and
    every workload's process image that of numaw, the program the VM runs (workload/image.rs)."""
    src = read_source(str(scenario_path(name_or_path)))
    d = parse_toml(src) if isinstance(src, str) else src
    d.setdefault("kernel", {})["version"] = choice(kernel).profile
    for w in d.get("workload", []):
        if isinstance(w, dict):
            w["image"] = "numaw"
    if overrides:
        apply_overrides(d, overrides)
    return d


def validate(name_or_path: str, kernel: str = "6.12", *, out: Path | None = None, overrides=None,
             timeout_s: float | None = None, vm_result: Path | None = None, log=None, calibrate: bool = False,
             costs: Path | None = None) -> dict:
    """Simulate and boot; save sim.json, vm.json, comparison.json (and the console) in `out`."""
    return validate_boots(name_or_path, kernel, out=out, overrides=overrides, timeout_s=timeout_s,
                          vm_results=[vm_result] if vm_result else None, log=log, calibrate=calibrate,
                          costs=costs)[0]


def _simulate(d: dict, name: str, kernel: str, out: Path, log):
    text = to_toml(d)
    resolved = numasim.resolve(text)
    (out / "scenario.toml").write_text(text)
    t0 = time.monotonic()
    sim = numasim.run(text)
    log(f"simulated {name} ({choice(kernel).profile} profile) in {time.monotonic() - t0:.1f} s")
    sim.save(out / "sim.json")
    return sim, resolved


def validate_boots(name_or_path: str, kernel: str = "6.12", *, boots: int = 1, out: Path | None = None,
                   overrides=None, timeout_s: float | None = None, vm_results: list | None = None, log=None,
                   calibrate: bool = False, costs: Path | None = None, trace_faults: bool = False,
                   kernel_profile: bool = False, with_sampler: bool = True) -> list:
    """One simulation (deterministic) against `boots` boots, or against the saved VM results
    `vm_results`, one comparison each. With more than one, each is saved in out/bootN.
    `costs`: simulate with the VM costs measured by `numasim calibrate` (its profile or .json).
    `calibrate`: measure them in each boot before the workload (`numaw calibrate`) and simulate
    each boot with its own (bootN/sim.json). `trace_faults`: trace every hint fault in the VM.
    `kernel_profile`: boot with profile=2 (vm.json kernel_profile: where kernel-mode ticks landed).
    `with_sampler`: simulate the VM's runner beside the workload (realkernel/sampler.py; on by default)."""
    from numasim.realkernel import calibrate as calmod
    from numasim.realkernel import sampler

    log = log or (lambda m: None)
    d = scenario_dict(name_or_path, kernel, overrides)
    if trace_faults:  # the simulator counts the same kinds (run.trace_faults)
        d.setdefault("run", {})["trace_faults"] = True
    if costs:
        calmod.apply(d, calmod.load_costs(costs))
    name = Path(name_or_path).stem
    out = Path(out) if out else Path("out") / "validate" / f"{name}-{kernel}"
    out.mkdir(parents=True, exist_ok=True)
    if calibrate:
        resolved = numasim.resolve(to_toml(d))
        (out / "scenario.toml").write_text(to_toml(d))
        sim = None
    else:
        # with_sampler: the simulation has the VM's runner beside the workload
        # (realkernel/sampler.py); the VM is given the workload alone
        sim, _ = _simulate(sampler.add(copy.deepcopy(d)) if with_sampler else d, name, kernel, out, log)
        resolved = numasim.resolve(to_toml(d))
    runs = list(vm_results) if vm_results else [None] * boots
    cmps = []
    for i, vm_result in enumerate(runs):
        dest = out / f"boot{i + 1}" if len(runs) > 1 else out
        dest.mkdir(parents=True, exist_ok=True)
        if len(runs) > 1:
            log(f"boot {i + 1} of {len(runs)}")
        vm = _vm_result(resolved, kernel, dest, vm_result, timeout_s, log, calibrate, trace_faults, kernel_profile)
        boot_sim = sim
        if calibrate:
            cal = vm.raw.get("source", {}).get("calibration")
            if not cal:
                raise RealKernelError(f"--calibrate: the VM result of boot {i + 1} has no calibration "
                                      "(it was run without `numaw calibrate`)")
            boot_d = calmod.apply(copy.deepcopy(d), cal)
            if with_sampler:
                sampler.add(boot_d, vm.raw)
            boot_sim, _ = _simulate(boot_d, name, kernel, dest, log)
        cmps.append(_compare(boot_sim, vm, name, kernel, dest, timed=bool(calibrate or costs)))
    return cmps


def _vm_result(resolved: dict, kernel: str, out: Path, vm_result, timeout_s, log, calibrate: bool,
               trace_faults: bool = False, kernel_profile: bool = False):
    if vm_result and str(vm_result).endswith((".log", ".console")):  # re-read a saved console log
        from numasim.realkernel.console import build_result, parse_console

        parsed = parse_console(Path(vm_result).read_text(errors="replace"))
        vm = build_result(parsed, resolved, {"kind": "qemu", "kernel": parsed["boot"].get("release"),
                                             "kernel_choice": kernel, "accel": "tcg", "console": str(vm_result),
                                             "warnings": parsed["warnings"]})
    elif vm_result:
        from numasim.storage import load_result

        vm = load_result(vm_result, check=False)
    else:
        from numasim.realkernel.vm import run_vm

        vm = run_vm(resolved, kernel, timeout_s=timeout_s, workdir=out / "vm", log=log, calibrate=calibrate,
                    trace_faults=trace_faults, kernel_profile=kernel_profile)
    vm.save(out / "vm.json")
    return vm


def _compare(sim, vm, name: str, kernel: str, out: Path, timed: bool = False) -> dict:
    cmp = cmpmod.compare(sim, vm, timed=timed)
    if sim.raw.get("fault_kinds") is not None and vm.raw.get("fault_kinds"):
        from numasim.realkernel.pacing import fault_kinds_table

        cmp["fault_kinds"] = fault_kinds_table(sim, vm)
    if vm.raw.get("kernel_profile", {}).get("rows"):
        cmp["kernel_profile"] = cmpmod.kernel_profile_table(vm.raw)
    cmp.update({"scenario": name, "kernel": kernel, "profile": choice(kernel).profile,
                "vm_kernel": vm.raw.get("source", {}).get("kernel"), "out": str(out),
                "vm_warnings": vm.raw.get("source", {}).get("warnings", []),
                "vm_missing_settings": vm.raw.get("source", {}).get("missing_settings", [])})
    (out / "comparison.json").write_text(json.dumps(cmp, indent=1))
    return cmp


def cmd_validate(args) -> int:
    if args.list:
        for n in shipped():
            print(n)
        return 0
    from numasim.outpaths import check_output
    from numasim.scenario import UsageError, parse_set

    if not args.scenario:
        raise UsageError("give a scenario (a file or a shipped name: numasim validate --list)")

    if args.out:
        check_output(args.out, "dir", "--out")
    overrides = [parse_set(s) for s in args.set or []]
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if not args.quiet else None
    kernels = args.kernel or ["6.12"]
    if args.calibrate and args.costs:
        raise UsageError("--calibrate measures the costs in each boot; --costs takes them from a file: give one")
    if args.boots < 1:
        raise UsageError(f"--boots must be at least 1, got {args.boots}")
    vm_results = args.vm_result or []
    if vm_results and (len(kernels) > 1 or args.boots != 1):
        raise UsageError("--vm-result stands for the boots of one kernel: give one --kernel and no --boots")
    status = 0
    results = []
    for k in kernels:
        out = Path(args.out) / f"{Path(args.scenario).stem}-{k}" if args.out else None
        cmps = validate_boots(args.scenario, k, boots=args.boots, out=out, overrides=overrides,
                              timeout_s=args.timeout, vm_results=vm_results or None, log=log,
                              calibrate=args.calibrate, costs=args.costs, trace_faults=args.trace_faults,
                              kernel_profile=args.kernel_profile, with_sampler=not args.no_sampler)
        for cmp in cmps:
            if not args.json:
                print(f"{cmp['scenario']} on {cmp['vm_kernel']} (simulated with the {cmp['profile']} profile); "
                      f"saved in {cmp['out']}")
                print(cmpmod.table(cmp))
                for w in cmp.get("vm_warnings", []):
                    if not w.startswith("missing="):
                        print(f"warning (VM): {w}")
                for path in cmp.get("vm_missing_settings", []):
                    print(f"warning (VM): the guest kernel has no {path}: the scenario's setting was not applied "
                          "there (the simulation used it)")
                if cmp.get("fault_kinds"):
                    print("hint faults per scan pass and thread (--trace-faults):")
                    print(cmp["fault_kinds"])
                if cmp.get("kernel_profile"):
                    print("where the VM's kernel-mode ticks landed (--kernel-profile):")
                    print(cmp["kernel_profile"])
                print()
        if len(cmps) > 1:
            summary = cmpmod.across_boots(cmps)
            summary.update({"scenario": cmps[0]["scenario"], "kernel": k})
            Path(cmps[0]["out"]).parent.joinpath("boots.json").write_text(json.dumps(summary, indent=1))
            if not args.json:
                print(f"{summary['scenario']} on {k}: {len(cmps)} boots, checked metrics "
                      f"({'each agrees in a majority of boots' if summary['ok'] else 'not all agree in a majority of boots'})")
                print(cmpmod.boots_table(summary))
                print()
            results.append({"boots": cmps, "summary": summary})
            ok = summary["ok"]
        else:
            results.append(cmps[0])
            ok = cmps[0]["ok"]
        if args.strict and not ok:
            status = 1
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=1))
    return status


def register(subparsers, command) -> None:
    """Add `validate` and `hostrun` to the numasim command line (``command``:
    cli_parser._command)."""
    sp = command(subparsers, "validate", "run a scenario in the simulator and on a real kernel (QEMU), side by side",
                 "Run a validation scenario in the simulator and in a Debian kernel booted in "
                 "QEMU, and print both side by side with the relative differences "
                 "(docs/realkernel.md). Needs qemu-system-x86, busybox-static and gcc "
                 "(make system-deps); the C workload is built on first use.",
                 "  numasim validate --list\n  numasim validate remote-toucher-4k --kernel 6.1 --kernel 6.12\n"
                 "  numasim validate two-processes-4k --kernel 6.1 --boots 3",
                 cmd_validate)
    sp.add_argument("scenario", nargs="?", help="scenario TOML file, or a shipped name (--list)")
    sp.add_argument("--kernel", action="append", choices=sorted(KERNELS),
                    help="Debian kernel to boot (repeatable; default 6.12)")
    sp.add_argument("--list", action="store_true", help="list the shipped validation scenarios")
    sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="scenario override (repeatable)")
    sp.add_argument("--out", metavar="DIR", help="where to save sim.json, vm.json, comparison.json (default out/validate)")
    sp.add_argument("--timeout", type=float, metavar="S", help="VM time limit in seconds (default from the scenario)")
    sp.add_argument("--boots", type=int, default=1, metavar="N",
                    help="boot each kernel N times against the one simulation; with N > 1 each boot is "
                         "saved in bootK/ and a summary says in how many boots each checked metric agreed")
    sp.add_argument("--vm-result", metavar="PATH", action="append",
                    help="reuse a saved VM result (.json) or console log (.log) instead of booting "
                         "(repeatable: several boots of one kernel)")
    sp.add_argument("--calibrate", action="store_true",
                    help="run `numaw calibrate` in each boot before the workload and simulate each boot with "
                         "the costs it measured (bootN/sim.json)")
    sp.add_argument("--costs", metavar="FILE",
                    help="simulate with the VM costs of a profile written by `numasim calibrate` (or its .json)")
    sp.add_argument("--trace-faults", action="store_true",
                    help="trace every NUMA hint fault in the VM (kprobe on task_numa_fault: vm.json "
                         "fault_kinds, per thread, 100 ms and kind) and each task_numa_work call with the "
                         "scanning thread's scan period (numa_events `numa_work`), and who moves the per-CPU "
                         "LRU add batches (kprobe on folio_batch_move_lru: vm.json lru_moves), and where the "
                         "clocksource is HPET who reads it (hist triggers on a kprobe on read_hpet: vm.json "
                         "kernel_profile.clock_read_hist); slows hint faults and clock reads")
    sp.add_argument("--kernel-profile", action="store_true",
                    help="boot with profile=2 and report the kernel functions that the CPUs' kernel-mode ticks "
                         "interrupted over the run (/proc/profile, the ticks counted as system time): vm.json "
                         "kernel_profile")
    sp.add_argument("--no-sampler", action="store_true",
                    help="simulate the workload alone, without the VM's runner beside it (by default a `sampler` "
                         "workload takes the CPU time the boot's runner took per sample and per numa_maps read: "
                         "realkernel/sampler.py, docs/realkernel.md, \"The runner as a task\")")
    sp.add_argument("--json", action="store_true", help="print the comparison as JSON")
    sp.add_argument("--strict", action="store_true",
                    help="exit 1 when a checked metric is outside ±25%% (with several boots: in a majority of them)")
    sp.add_argument("--quiet", "-q", action="store_true", help="no progress messages")
    register_hostrun(subparsers, command)
    from numasim.realkernel import calibrate

    calibrate.register(subparsers, command)


def register_hostrun(subparsers, command) -> None:
    from numasim.realkernel.host import cmd_hostrun

    sp = command(subparsers, "hostrun", "run a scenario's workloads on this (NUMA) host's kernel; same result format",
                 "Run the scenario's workloads on this host's own kernel (a NUMA machine, as "
                 "root) with its sysctls and THP settings applied, and write the result in the "
                 "simulator's format, to compare with `numasim compare`.",
                 "  numasim hostrun my.toml --save host.json", cmd_hostrun)
    sp.add_argument("scenario", help="scenario TOML file")
    sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="scenario override (repeatable)")
    sp.add_argument("--save", metavar="PATH", help="write the result JSON to PATH")
    sp.add_argument("--json", action="store_true", help="print the result JSON")
    sp.add_argument("--timeout", type=float, metavar="S", help="time limit in seconds")
    sp.add_argument("--no-settings", action="store_true",
                    help="leave numa_balancing, the scan tunables and THP as they are")

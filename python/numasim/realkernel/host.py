"""The host runner: a scenario's workloads on this machine's own kernel (a real NUMA host).

It applies the scenario's kernel settings (kernel.numa_balancing, the scan tunables, the
tiering sysctls, THP) when it may (root), runs `numaw run` with the scenario's workloads, which snapshots
/proc/vmstat, the /proc/interrupts TLB line and each process's numa_maps over time, and
writes the simulator's result format (source = {"kind": "host", ...}). It refuses a
single-node host: there is nothing to balance.
"""

from __future__ import annotations

import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

from numasim.realkernel import spec as specmod
from numasim.realkernel.console import build_result, parse_console
from numasim.realkernel.errors import RealKernelError

NODE_SYSFS = "/sys/devices/system/node"
SCAN_DIR = "/sys/kernel/debug/sched/numa_balancing"


def host_nodes(sysfs: str = NODE_SYSFS) -> dict:
    """{node: number of CPUs} for the online nodes that have CPUs or memory."""
    root = Path(sysfs)
    nodes = {}
    for d in sorted(root.glob("node[0-9]*")):
        try:
            n = int(d.name[4:])
        except ValueError:
            continue
        cpus = (d / "cpulist").read_text().strip() if (d / "cpulist").exists() else ""
        count = 0
        for part in filter(None, cpus.split(",")):
            a, _, b = part.partition("-")
            count += int(b or a) - int(a) + 1
        nodes[n] = count
    return nodes


def check_numa_host(sysfs: str = NODE_SYSFS, need: int = 2) -> dict:
    nodes = host_nodes(sysfs)
    if len(nodes) < need:
        raise RealKernelError(
            f"this host has {len(nodes) or 1} NUMA node{'s' if len(nodes) > 1 else ''}; the host runner needs a "
            f"NUMA machine with at least {need} nodes. On a single-node host use `numasim validate`, which boots "
            "a QEMU VM with virtual NUMA nodes.", loc="host")
    return nodes


def _settings_files(settings: dict) -> dict:
    files = {
        "/proc/sys/kernel/numa_balancing": str(settings["numa_balancing"]),
        "/sys/kernel/mm/transparent_hugepage/enabled": settings["thp_enabled"],
    }
    scan = Path(SCAN_DIR)
    for k in ("scan_delay_ms", "scan_period_min_ms", "scan_period_max_ms", "scan_size_mb"):
        p = scan / k if scan.is_dir() else Path(f"/proc/sys/kernel/numa_balancing_{k}")
        files[str(p)] = str(settings[k])
    for name, value in settings.get("tiering", {}).items():
        paths = specmod.TIERING_PATHS[name]
        files[next((p for p in paths if Path(p).exists()), paths[0])] = str(value)
    for kb, v in settings.get("mthp", {}).items():
        p = Path(f"/sys/kernel/mm/transparent_hugepage/hugepages-{kb}kB/enabled")
        if p.exists():
            files[str(p)] = v
    return files


def _current(path: str) -> str | None:
    try:
        v = Path(path).read_text().strip()
    except OSError:
        return None
    if "[" in v:  # "always [madvise] never"
        v = v[v.index("[") + 1:v.index("]")]
    return v


def apply_settings(settings: dict, log=None) -> dict:
    """Write the settings where possible; return {path: previous value} to restore."""
    log = log or (lambda m: None)
    saved = {}
    for path, value in _settings_files(settings).items():
        cur = _current(path)
        if cur is None:
            log(f"warning: {path} is not readable; {value!r} not applied")
            continue
        if cur == value:
            continue
        try:
            Path(path).write_text(value + "\n")
            saved[path] = cur
        except OSError as exc:
            log(f"warning: cannot set {path} to {value!r} ({exc.strerror}); it stays {cur!r}")
    return saved


def restore_settings(saved: dict) -> None:
    for path, value in saved.items():
        try:
            Path(path).write_text(value + "\n")
        except OSError:
            pass


def run_host(resolved: dict, *, numaw: Path | None = None, apply: bool = True, timeout_s: float | None = None,
             sysfs: str = NODE_SYSFS, log=None):
    """Run the scenario's workloads on this host; return a Result (source kind "host")."""
    from numasim.realkernel.vm import expected_run_s, numaw_path

    log = log or (lambda m: None)
    nodes = check_numa_host(sysfs, need=max(2, int(resolved["machine"]["topology"]["nr_nodes"])))
    want = [len(c) for c in resolved["machine"]["topology"]["node_cpus"]]
    have = [nodes[n] for n in sorted(nodes)][:len(want)]
    if have != want:
        log(f"note: the scenario's machine has {want} CPUs per node, this host {have}; the result keeps "
            "the scenario's machine, so simulate with a [machine] that describes this host")
    lines = specmod.workload_lines(resolved)
    settings = specmod.kernel_settings(resolved)
    interval, mem_ms, maps_ms = specmod.sample_intervals(resolved, floor_ms=20)
    max_s = min(float(resolved.get("run", {}).get("max_sim_s", 7200)), 3 * expected_run_s(resolved))
    exe = numaw or numaw_path()
    saved = apply_settings(settings, log) if apply else {}
    try:
        with tempfile.TemporaryDirectory(prefix="numasim-host-") as tmp:
            spec = Path(tmp) / "scenario.txt"
            spec.write_text("\n".join(lines) + "\n")
            t0 = time.monotonic()
            try:
                p = subprocess.run([str(exe), "run", str(spec), f"interval_ms={interval}", f"mem_ms={mem_ms}",
                                    f"maps_ms={maps_ms}", f"place_ms={specmod.place_interval(resolved, mem_ms)}",
                                    f"max_s={max_s:.1f}"],
                                   capture_output=True, text=True, timeout=timeout_s or max_s + 60)
            except subprocess.TimeoutExpired:
                raise RealKernelError(f"the host run did not finish within {timeout_s or max_s + 60:.0f} s") from None
            wall = time.monotonic() - t0
    finally:
        restore_settings(saved)
    parsed = parse_console(p.stdout)
    if p.returncode not in (0, 3) and not parsed["errors"]:
        raise RealKernelError(f"numaw run exited with status {p.returncode}: {p.stderr.strip()[-300:]}")
    source = {"kind": "host", "kernel": platform.release(), "hostname": platform.node(), "wall_s": round(wall, 3),
              "settings_applied": apply, "nodes": len(nodes), "euid": os.geteuid()}
    return build_result(parsed, resolved, source)


def cmd_hostrun(args) -> int:
    import sys

    import numasim
    from numasim.scenario import parse_set, scenario_toml

    if args.save:
        from numasim.outpaths import check_output

        check_output(args.save, "file", "--save")
    overrides = [parse_set(s) for s in args.set or []]
    resolved = numasim.resolve(scenario_toml(args.scenario, overrides=overrides))
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    result = run_host(resolved, apply=not args.no_settings, timeout_s=args.timeout, log=log)
    if args.save:
        result.save(args.save)
    if args.json:
        print(result.to_json())
        return 0
    print(f"{platform.release()}: elapsed {result.elapsed_s:.3f} s, user {result.times['user_s']:.3f} s, "
          f"system {result.times['system_s']:.3f} s")
    for k in sorted(result.counters):
        if k.startswith(("numa_", "pgmigrate", "nr_tlb", "thp_migration")) or k == "pgfault":
            print(f"{k:32} {result.counters[k]}")
    tlb = result.interrupts.get("TLB")
    if tlb:
        print(f"{'TLB shootdown IPIs':32} {tlb['total']}")
    return 0

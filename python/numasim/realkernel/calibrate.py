"""`numasim calibrate --kernel V`: a machine profile whose costs are measured, not set by hand.

`numaw calibrate` (workloads/calibrate.c) runs micro-benchmarks of the kernel paths the engine
charges, in the QEMU guest of `numasim validate`; `costs()` turns its figures into the
constants of `[machine.cost]` (cost.rs), each one from the mechanism it stands for:

    stream_gibps         memset rate of a lone thread, [CPU node][memory node]
    page_store_gibps     the same thread's memset of one 4 KiB page per call (a program's store op)
    touch_gibps          the rate at which the same thread crosses pages loading one byte of
                         every cache line (remote_toucher.c's loop: a program's load and rmw ops)
    clock_read_ns        a time-bound stream's clock read (once per 256 pages): the CPU time it
    clock_read_sys_ns    adds, and the system time the guest charges for it, per number of other
                         CPUs (clock_busy_K_ns; clock_loop_K_sys_ns, K+1 threads running the
                         toucher's loop); boots before 2026-11-28 keep the scenario's figures
    fault_entry_exit_ns  a read fault of an untouched page (it maps the zero page)
    clear_page_ns        a first touch beyond its fault entry/exit and its own store: the
                         engine charges do_anonymous_page's allocation, clear and map here;
                         measured with every vCPU first-touching at once where numaw gives it
                         (all_first_touch), as a workload's threads do, else by one thread
    page_copy_gibps      4 KiB `rep movsq` (copy_page)
    pte_update_ns        mprotect() per PTE: change_protection(), as change_prot_numa()
    migrate_page_ns      move_pages(2) per page in 512-page calls, beyond the copy
    hint_fault_ns        the mean store that takes a NUMA hint fault (one thread touching
                         its local pages with balancing on), beyond fault entry/exit
    clone_ns             pthread_create of a numaw thread, the caller's time (median of 41)
    ipi_*_ns             an mprotect()'s TLB flush with 0, 1 and 2 other CPUs in the mm,
                         and what a spinning target loses per IPI
    host_cores           all CPUs writing at once against one: the host cores the vCPUs share
    steal_in_runtime     the CPU time those writers were charged over their wall time: how much
                         of the host's time for other vCPUs the guest counts as runtime
    tick_sys_share       one thread per CPU spinning in registers with NUMA balancing off: the
                         share of their CPU time charged as system, a busy CPU's own tick and
                         the softirqs it raises (spin_sys_share)

What it cannot measure keeps the scenario's (or the profile's) value and is listed as such.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

from numasim.realkernel.errors import RealKernelError

PAGE = 4096
GIB = 1 << 30
MIN_HINT_FAULTS = 1000  # fewer and the per-fault figure is noise: hint_fault_ns is not measured

# the constants `costs()` can set; the rest of [machine.cost] is not measured here
MEASURED = ("stream_gibps", "page_store_gibps", "touch_gibps", "clock_read_ns", "clock_read_sys_ns", "clear_page_ns", "fault_entry_exit_ns", "page_copy_gibps", "pte_update_ns",
            "migrate_page_ns", "hint_fault_ns", "ipi_send_ns", "ipi_per_target_ns", "ipi_receive_ns",
            "clone_ns")


def _stream(cal: dict, nodes: int, what: str = "stream") -> list:
    """[CPU node][memory node] of `what`_I_J; pairs beyond the first two nodes take node 0's
    local or remote figure."""
    local = cal.get(f"{what}_0_0")
    remote = cal.get(f"{what}_0_1", local)
    if not local or local <= 0:
        raise RealKernelError(f"the calibration has no {what}_0_0: cannot make a profile")

    def one(i, j):
        v = cal.get(f"{what}_{i}_{j}") or (local if i == j else remote)
        return round(float(v), 4)
    return [[one(i, j) for j in range(nodes)] for i in range(nodes)]


def costs(cal: dict, nodes: int) -> tuple:
    """({cost key: value}, {cost key: how it was measured}, [what was not measured])."""
    out, how, missing = {}, {}, []
    out["stream_gibps"] = _stream(cal, nodes)
    how["stream_gibps"] = "memset of a 2 MiB-aligned buffer bound to the memory node, by one pinned thread"
    page_stream_ns = PAGE / (out["stream_gibps"][0][0] * GIB / 1e9)
    if cal.get("touch_0_0") and cal.get("page_store_0_0"):  # numaw from 2026-11-28
        out["page_store_gibps"] = _stream(cal, nodes, "page_store")
        how["page_store_gibps"] = "program.c's store loop (one 4 KiB memset per page) by one pinned thread"
        out["touch_gibps"] = _stream(cal, nodes, "touch")
        how["touch_gibps"] = "remote_toucher.c's loop (one load per cache line, one store per page) by one pinned thread"
    else:
        missing += ["page_store_gibps", "touch_gibps"]
    loops = [k for k in range(64) if f"clock_loop_{k}_sys_ns" in cal]
    if cal.get("clock_ns") and loops and loops == list(range(len(loops))):
        # the read's time: a loop of reads alone and with K other CPUs spinning; the system
        # time charged per read: K+1 threads running remote_toucher.c's loop with a read per
        # 256 pages, less the same loop without (their CPU time per read is within the noise
        # of the host's scheduling, their system time is not)
        busy = [float(cal["clock_ns"])] + [float(cal.get(f"clock_busy_{k}_ns", cal["clock_ns"])) for k in loops[1:]]
        out["clock_read_ns"] = [round(max(v, 0.0), 1) for v in busy]
        out["clock_read_sys_ns"] = [round(max(float(cal[f"clock_loop_{k}_sys_ns"]), 0.0), 1) for k in loops]
        how["clock_read_ns"] = "clock_gettime(CLOCK_MONOTONIC) in a loop, alone and with K = 1, 2, ... other CPUs spinning"
        how["clock_read_sys_ns"] = ("the system time getrusage charges per read to K+1 threads crossing pages with "
                                    "remote_toucher.c's loop and a read per 256 pages, less the same loop without reads")
    else:  # an older boot keeps the scenario's: a lone loop of reads is charged far less system time per read
        missing += ["clock_read_ns", "clock_read_sys_ns"]
    if cal.get("zero_fault"):
        out["fault_entry_exit_ns"] = round(float(cal["zero_fault"]), 1)
        how["fault_entry_exit_ns"] = "read fault of an untouched page (maps the zero page: entry, walk, exit)"
    if cal.get("first_touch") and "fault_entry_exit_ns" in out:
        rest = float(cal["first_touch"]) - page_stream_ns - out["fault_entry_exit_ns"]
        out["clear_page_ns"] = round(max(rest, 0.0), 1)
        how["clear_page_ns"] = (f"first touch {cal['first_touch']:.0f} ns/page - its store {page_stream_ns:.0f} "
                                f"- fault entry/exit: do_anonymous_page's allocation, clear_page "
                                f"({cal.get('rep_stosb', 0):.0f} ns of rep stosb), charge and map")
    hc, writers = host_cores(cal), cal.get("all_writers")
    if cal.get("all_first_touch") and hc and writers and "fault_entry_exit_ns" in out:
        # every vCPU first-touching at once, as a workload's threads do: the engine gives each
        # min(1, host_cores / busy) of a host core, so the CPU time of a page is the wall
        # time times that share
        share = min(1.0, hc / float(writers))
        cpu = float(cal["all_first_touch"]) * share
        out["clear_page_ns"] = round(max(cpu - page_stream_ns - out["fault_entry_exit_ns"], 0.0), 1)
        how["clear_page_ns"] = (f"{writers} first touches at once, {cal['all_first_touch']:.0f} ns/page each (wall) "
                                f"x {share:.3f} of a host core (host_cores {hc}) - its store {page_stream_ns:.0f} "
                                f"- fault entry/exit: do_anonymous_page's allocation, clear and map under a "
                                f"workload's load (alone: {cal.get('first_touch', 0):.0f} ns/page)")
    if cal.get("rep_movsq"):
        out["page_copy_gibps"] = round(PAGE / float(cal["rep_movsq"]) * 1e9 / GIB, 4)
        how["page_copy_gibps"] = f"4 KiB rep movsq (copy_page): {cal['rep_movsq']:.0f} ns"
    if cal.get("mprotect_pte") is not None:
        out["pte_update_ns"] = round(float(cal["mprotect_pte"]), 2)
        how["pte_update_ns"] = "mprotect() per PTE (change_protection)"
    if cal.get("move_pages") and "page_copy_gibps" in out:
        copy_ns = PAGE / (out["page_copy_gibps"] * GIB / 1e9)
        out["migrate_page_ns"] = round(max(float(cal["move_pages"]) - copy_ns, 0.0), 1)
        how["migrate_page_ns"] = f"move_pages(2) {cal['move_pages']:.0f} ns/page in 512-page calls - copy {copy_ns:.0f}"
    faults, slow = int(cal.get("hint_faults", 0) or 0), int(cal.get("hint_slow", 0) or 0)
    if faults >= MIN_HINT_FAULTS and slow >= faults // 2 and "fault_entry_exit_ns" in out:
        mean = "hint_mean_ns" in cal  # older numaw: the median only
        per = float(cal["hint_mean_ns" if mean else "hint_slow_ns"]) - float(cal.get("hint_store_ns", 0.0))
        out["hint_fault_ns"] = round(max(per - out["fault_entry_exit_ns"], 0.0), 1)
        how["hint_fault_ns"] = (f"{'mean' if mean else 'median'} of the {slow} slowest stores with balancing on "
                                f"({faults} hint faults counted): {per:.0f} ns beyond a plain store, less fault "
                                "entry/exit")
    else:
        missing.append(f"hint_fault_ns ({faults} hint faults and {slow} slow stores measured, "
                       f"{MIN_HINT_FAULTS} needed)")
    ipis = float(cal.get("ipis_1", 0) or 0)
    if "flush_ipi_0" in cal and "flush_ipi_1" in cal and ipis > 0:
        # the sender waits for the handler (smp_call_function_many_cond): a round is
        # send + per target + the receiver's handler, which the spinning receiver loses
        round_ns = (float(cal["flush_ipi_1"]) - float(cal["flush_ipi_0"])) / ipis
        receive = min(max(float(cal.get("spin_loss", 0.0)) / ipis, 0.0), max(round_ns, 0.0))
        out["ipi_receive_ns"] = round(receive, 1)
        hc = host_cores(cal) or 0
        per_target = 0.0
        if hc >= 3 and float(cal.get("ipis_2", 0) or 0) > ipis:  # three busy vCPUs fit on the host
            per_target = max((float(cal["flush_ipi_2"]) - float(cal["flush_ipi_1"]))
                             / (float(cal["ipis_2"]) - ipis), 0.0)
        out["ipi_per_target_ns"] = round(per_target, 1)
        out["ipi_send_ns"] = round(max(round_ns - receive - per_target, 0.0), 1)
        how["ipi_send_ns"] = (f"mprotect() of one page with 0 and 1 other CPU in the mm: {cal['flush_ipi_0']:.0f} and "
                              f"{cal['flush_ipi_1']:.0f} ns, {ipis:.2f} TLB IPIs each: {round_ns:.0f} ns per IPI, "
                              "less the handler")
        how["ipi_per_target_ns"] = ("the extra cost of a second target" if per_target else
                                    "0: not separable here (a second spinning vCPU outnumbers the host's cores; "
                                    "the round is charged as send)")
        how["ipi_receive_ns"] = "time a spinning thread of the mm loses per TLB IPI"
    else:
        missing += ["ipi_send_ns", "ipi_per_target_ns", "ipi_receive_ns"]
    if cal.get("clone"):
        out["clone_ns"] = round(float(cal["clone"]), 1)
        how["clone_ns"] = "pthread_create of a numaw thread on a fresh 256 KiB stack, the caller's time, median of 41"
    else:
        missing.append("clone_ns")
    missing += [k for k in ("latency_ns", "node_bandwidth_gibps", "interconnect_gibps", "smt_share",
                            "dram_bytes_per_store", "tlb_flush_local_all_ns", "tlb_flush_local_one_ns",
                            "vm_exit_ns", "ept_violation_ns")]
    return out, how, missing


def host_cores(cal: dict) -> float | None:
    """The host CPU the vCPUs share, in lone vCPUs: all CPUs' aggregate store rate over one's."""
    agg, one, writers = cal.get("all_gibps"), cal.get("stream_0_0"), cal.get("all_writers")
    if not agg or not one or not writers:
        return None
    return round(max(1.0, min(float(writers), float(agg) / float(one))), 3)


def steal_in_runtime(cal: dict) -> float | None:
    """The share of the host's time for other vCPUs that the guest counted as the writers'
    runtime: their CPU time over wall time is host_cores / n where none is, 1 where all is."""
    share, n, hc = cal.get("all_cpu_share"), cal.get("all_writers"), host_cores(cal)
    if share is None or not n or not hc or n - hc < 0.25:
        return None
    return round(min(max((float(share) * n - hc) / (n - hc), 0.0), 1.0), 3)


def tick_sys_share(cal: dict) -> float | None:
    """The system share of spinning threads' CPU time, one per CPU, with NUMA balancing off:
    what a busy CPU's timer tick and the softirqs it raises take, as the guest accounts it
    (numaw calibrate's `spin_sys_share`; boots before 2026-11-28 do not have it)."""
    share = cal.get("spin_sys_share")
    if share is None:
        return None
    return round(max(float(share), 0.0), 4)


def cost_overrides(cal: dict, nodes: int) -> list:
    """`--set machine.cost.KEY=VALUE` pairs (and machine.host_cores, steal_in_runtime)."""
    values, _, _ = costs(cal, nodes)
    sets = [(f"machine.cost.{k}", v) for k, v in values.items()]
    hc = host_cores(cal)
    if hc:
        sets.append(("machine.host_cores", hc))
        sir = steal_in_runtime(cal)
        if sir is not None:
            sets.append(("machine.steal_in_runtime", sir))
    tss = tick_sys_share(cal)
    if tss is not None:
        sets.append(("machine.tick_sys_share", tss))
    return sets


def apply(d: dict, cal: dict) -> dict:
    """The scenario dict `d` with its VM costs replaced by the measured ones."""
    from numasim.scenario import apply_overrides

    m = d.setdefault("machine", {})
    nodes = int(m.get("nodes") or len(m.get("distances") or []) or 2)
    return apply_overrides(d, cost_overrides(cal, nodes))


def _toml_value(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def profile_toml(name: str, resolved: dict, cal: dict, info: dict) -> str:
    """A machine profile (the layout of profiles/machines/*.toml) with every measured constant
    commented `measured: ...`, the rest copied from the scenario and commented `not measured`."""
    topo = resolved["machine"]["topology"]
    nodes = int(topo["nr_nodes"])
    values, how, missing = costs(cal, nodes)
    base = resolved["machine"]["cost"]
    per = len(topo["node_cpus"][0])
    mem_gib = [int(p) * 4096 / GIB for p in topo["node_pages"]]
    day = datetime.date.today().isoformat()
    lines = [f"# Measured by `numasim calibrate` ({day}): `numaw calibrate` in a QEMU TCG guest running",
             f"# {info.get('kernel')} ({info.get('qemu')}), host wall time {info.get('wall_s')} s.",
             "# Raw figures: " + ", ".join(f"{k}={v}" for k, v in sorted(cal.items())),
             f"name = {json.dumps(name)}",
             f"description = {json.dumps(f'QEMU TCG guest, {nodes} nodes x {per} CPUs, costs measured on {day}')}",
             f"nodes = {nodes}", f"cpus_per_node = {per}", f"smt = {int(topo.get('smt', 1))}",
             f"memory_gib_per_node = {_toml_value(round(min(mem_gib), 3))}",
             f"distances = {_toml_value(topo['distance'])}"]
    hc = host_cores(cal)
    sir = steal_in_runtime(cal)
    if hc:
        lines += [f"# measured: {cal.get('all_writers')} writers at once made {cal.get('all_gibps')} GiB/s, "
                  f"{cal.get('stream_0_0')} alone", f"host_cores = {hc}"]
    if hc and sir is not None:
        lines += [f"# measured: the writers were charged {cal.get('all_cpu_share')} of their wall time as CPU",
                  f"steal_in_runtime = {sir}"]
    tss = tick_sys_share(cal)
    if tss is not None:
        lines += ["# measured: the system share of one spinning thread per CPU", f"tick_sys_share = {tss}"]
    lines += ["", "[cost]"]
    for key in base:
        if key in values:
            lines += [f"# measured: {how.get(key, '')}", f"{key} = {_toml_value(values[key])}"]
        else:
            lines += ["# not measured (from the scenario)", f"{key} = {_toml_value(base[key])}"]
    # provenance, as the built-in profiles give it (issue 28): measured here, or the scenario's
    lines += ["", "[source]"]
    if hc:
        lines.append('host_cores = "measured: all vCPUs\' store rate over one vCPU\'s (numaw calibrate)"')
    if hc and sir is not None:
        lines.append('steal_in_runtime = "measured: the writers\' CPU time over their wall time (numaw calibrate)"')
    if tss is not None:
        lines.append('tick_sys_share = "measured: the system share of spinning threads, one per CPU (numaw calibrate)"')
    for key in base:
        kind = f"measured: numaw calibrate, {info.get('kernel')}" if key in values else \
            "assumed: the validation scenario's hand-set VM cost (not measured by numaw calibrate)"
        lines.append(f"{key} = {json.dumps(kind)}")
    return "\n".join(lines) + "\n"


def load_costs(path: Path) -> dict:
    """The raw calibration figures saved beside a calibrated profile (`NAME.json`)."""
    p = Path(path)
    j = p.with_suffix(".json") if p.suffix == ".toml" else p
    try:
        data = json.loads(j.read_text())
    except FileNotFoundError:
        raise RealKernelError(f"no calibration {j} (written by `numasim calibrate --out`)", loc=str(path)) from None
    except json.JSONDecodeError as e:
        raise RealKernelError(f"{j} is not a calibration: {e}", loc=str(path)) from None
    cal = data.get("calibration") if isinstance(data, dict) else None
    if not isinstance(cal, dict) or not cal:
        raise RealKernelError(f"{j} has no \"calibration\" figures", loc=str(path))
    return cal


def cmd_calibrate(args) -> int:
    from numasim.realkernel.validate import scenario_dict
    from numasim.realkernel.vm import calibrate_vm
    from numasim.outpaths import check_output
    from numasim.scenario import to_toml
    import numasim

    kernel = args.kernel or "6.12"
    out = Path(args.out) if args.out else Path("out") / "calibrate" / f"qemu-tcg-{kernel}.toml"
    if args.out:
        check_output(args.out, "file", "--out")
    if out.suffix != ".toml":
        raise RealKernelError(f"--out must name a .toml file, got {out}", loc="--out")
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if not args.quiet else None
    resolved = numasim.resolve(to_toml(scenario_dict(args.scenario, kernel)))
    info = calibrate_vm(resolved, kernel, timeout_s=args.timeout, workdir=out.parent / f"{out.stem}.vm", log=log)
    cal = info["calibration"]
    out.parent.mkdir(parents=True, exist_ok=True)
    text = profile_toml(out.stem, resolved, cal, info)
    tmp_t, tmp_j = out.with_name(f".{out.name}.tmp"), out.with_name(f".{out.stem}.json.tmp")
    tmp_t.write_text(text)
    tmp_j.write_text(json.dumps(info, indent=1, sort_keys=True))
    tmp_j.replace(out.with_suffix(".json"))
    tmp_t.replace(out)
    if args.json:
        values, how, missing = costs(cal, int(resolved["machine"]["topology"]["nr_nodes"]))
        print(json.dumps({"profile": str(out), "costs": values, "how": how, "not_measured": missing,
                          "host_cores": host_cores(cal), **info}, indent=1))
    else:
        print(f"calibrated on {info['kernel']}: {out} (figures in {out.with_suffix('.json')})")
        print(text)
    return 0


def register(subparsers, command) -> None:
    sp = command(subparsers, "calibrate", "measure the VM's kernel-path costs into a machine profile",
                 "Boot a Debian kernel in QEMU (as `numasim validate` does), run the C "
                 "micro-benchmarks of `numaw calibrate` (first touch, clear_page, copy_page, "
                 "mprotect per PTE, move_pages per page, NUMA hint faults, TLB-flush IPIs, "
                 "store bandwidth alone and all CPUs at once) and write a machine profile whose "
                 "costs are measured (docs/realkernel.md, \"Calibration\"). `numasim validate "
                 "--costs FILE` simulates with it; `validate --calibrate` measures in each boot.",
                 "  numasim calibrate --kernel 6.12 --out vm-6.12.toml\n"
                 "  numasim validate two-processes-4k --kernel 6.12 --costs vm-6.12.toml",
                 cmd_calibrate)
    from numasim.realkernel.kernels import KERNELS

    sp.add_argument("--kernel", choices=sorted(KERNELS), help="Debian kernel to boot (default 6.12)")
    sp.add_argument("--scenario", default="two-processes-4k",
                    help="validation scenario whose VM (topology and unmeasured costs) to calibrate "
                         "(default two-processes-4k)")
    sp.add_argument("--out", metavar="FILE.toml",
                    help="profile to write (default out/calibrate/qemu-tcg-KERNEL.toml; the raw figures "
                         "go beside it as .json)")
    sp.add_argument("--timeout", type=float, metavar="S", help="VM time limit in seconds")
    sp.add_argument("--json", action="store_true", help="print the costs and the raw figures as JSON")
    sp.add_argument("--quiet", "-q", action="store_true", help="no progress messages")

"""The VM backend: boot a Debian kernel in QEMU with the scenario's NUMA topology, run the
scenario's workloads from an initramfs, and parse the serial console into a result.

    fetch_kernel (kernels.py) -> build_initramfs -> qemu_command -> run_vm -> console.py

QEMU runs with TCG (software emulation): the KVM device on these hosts hangs stock kernels
(docs/realkernel.md). Every boot has a time limit, and every failure raises RealKernelError
with what went wrong.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from numasim.realkernel import spec as specmod
from numasim.realkernel.console import build_result, parse_console
from numasim.realkernel.errors import RealKernelError
from numasim.realkernel.kernels import cache_root, choice, fetch_kernel

QEMU = "qemu-system-x86_64"
BUSYBOX_PATHS = ("/bin/busybox", "/usr/bin/busybox")
SETUP_HINT = "install the system packages with `make system-deps` (system-packages.txt)"
REPO = Path(__file__).resolve().parents[3]
BOOT_ATTEMPTS = 3

INIT = r"""#!/bin/sh
# numasim real-kernel guest init: settings from /config, then `numaw run`, then power off.
/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tmpfs tmpfs /tmp
echo "@nsw boot uptime=$(cut -d' ' -f1 /proc/uptime) release=$(uname -r)"
# the guest's clock: with a stable TSC, sched_clock (and so a task's runtime) runs on while the
# host runs other vCPUs; where the TSC was marked unstable it is held to the tick
echo "@nsw clock source=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null) tsc_unstable=$(dmesg | grep -c -i 'tsc.*unstable')"
. /config
# `numasim calibrate` / `validate --calibrate`: the kernel paths' costs on this boot, measured
# before the scenario's settings are written (calibrate sets back what it changes)
if [ "$CALIBRATE" = 1 ]; then
    /bin/numaw calibrate > /tmp/cal.out 2>&1 || echo "@nsw warn calibrate_rc=$?" >> /tmp/cal.out
    cat /tmp/cal.out
fi
if [ "$RUN" = 0 ]; then
    echo "@nsw done rc=0"
    poweroff -f
fi
put() {
    if [ -e "$1" ]; then
        echo "$2" > "$1" 2>/dev/null || echo "@nsw warn write=$1 value=$2 failed"
    else
        echo "@nsw warn missing=$1"
    fi
}
scan=/sys/kernel/debug/sched/numa_balancing
[ -d $scan ] || scan=/proc/sys/kernel/numa_balancing_
for k in scan_delay_ms scan_period_min_ms scan_period_max_ms scan_size_mb; do
    eval v=\$$k
    if [ -d /sys/kernel/debug/sched/numa_balancing ]; then put $scan/$k $v; else put $scan$k $v; fi
done
put /sys/kernel/mm/transparent_hugepage/enabled $THP_ENABLED
for s in $MTHP; do
    f=/sys/kernel/mm/transparent_hugepage/hugepages-${s%%:*}kB/enabled
    [ -e $f ] && put $f ${s#*:}
done
put /proc/sys/kernel/numa_balancing $NUMA_BALANCING
# memory tiering (numa_balancing 2, 3): each setting as "PATH[,PATH...]=VALUE", written to the
# first path this kernel has (the hot threshold moved from debugfs to a sysctl in later trees)
for s in $TIERING; do
    f=
    for p in $(echo ${s%%=*} | tr , ' '); do [ -z "$f" ] && [ -e $p ] && f=$p; done
    put ${f:-${s%%,*}} ${s#*=}
done
# the memory tiers the kernel built (6.1+) and each node's demotion targets (boot log)
tiers=0
for d in /sys/devices/virtual/memory_tiering/memory_tier*; do
    [ -d $d ] || continue
    f=$d/nodelist
    [ -e $f ] || f=$d/nodes
    echo "@nsw tier id=${d##*memory_tier} nodes=$(cat $f 2>/dev/null)"
    tiers=$((tiers + 1))
done
[ $tiers = 0 ] && [ -n "$TIERING" ] && echo "@nsw warn missing=/sys/devices/virtual/memory_tiering"
dmesg | sed -n -e 's/.*Demotion targets for Node \([0-9]*\): preferred: \([0-9,-]*\), fallback: \([0-9,-]*\).*/@nsw demotion node=\1 preferred=\2 fallback=\3/p' \
    -e 's/.*Demotion targets for Node \([0-9]*\): null.*/@nsw demotion node=\1 preferred=- fallback=-/p'
# NUMA-balancing tracepoints (what the kernel decided): task moves, swaps and refusals, VMA
# skips (6.7+, counted by reason), scheduler migrations of the workloads' threads and the CPU
# each new one starts on (sched_wakeup_new: fork and clone placement), and a kprobe
# on task_numa_fault that records the hint faults whose migration failed (TNF_MIGRATE_FAIL)
T=/sys/kernel/tracing
mount -t tracefs tracefs $T 2>/dev/null || T=/sys/kernel/debug/tracing
if [ -d $T/events/sched ]; then
    echo mono > $T/trace_clock 2>/dev/null
    echo 2048 > $T/buffer_size_kb 2>/dev/null
    for e in sched_move_numa sched_swap_numa sched_stick_numa sched_skip_vma_numa sched_migrate_task sched_wakeup_new; do
        [ -e $T/events/sched/$e/enable ] && echo 1 > $T/events/sched/$e/enable
    done
    for e in sched_migrate_task sched_wakeup_new; do
        [ -e $T/events/sched/$e/filter ] && echo "$WORKLOAD_COMMS" > $T/events/sched/$e/filter
    done
    if echo 'p:numa_fault_fail task_numa_fault last_cpupid=%di:s32 mem_node=%si:s32 pages=%dx:s32 flags=%cx:u32' >> $T/kprobe_events 2>/dev/null; then
        echo 'flags & 16' > $T/events/kprobes/numa_fault_fail/filter
        echo 1 > $T/events/kprobes/numa_fault_fail/enable
    else
        echo "@nsw warn missing=kprobe_task_numa_fault"
    fi
    # `validate --trace-faults`: every hint fault (counted in the guest per thread, 10 ms and
    # kind), and each task_numa_work call (entry and return) with the words before p->numa_work in task_struct
    # (numa_scan_seq, numa_scan_period, numa_scan_period_max, numa_preferred_nid: their
    # offsets differ between releases, so five words are read and console.py picks them)
    # `validate --trace-faults`: who reads the clocksource when it is HPET (a system call per
    # read, no vDSO): its callers' stacks and tasks, counted in the kernel (hist triggers; the
    # stack walk per read slows each read several times, so not with --kernel-profile alone)
    if [ "$TRACE_FAULTS" = 1 ] && grep -q ' read_hpet$' /proc/kallsyms &&
       echo 'p:clock_read read_hpet' >> $T/kprobe_events 2>/dev/null; then
        echo 'hist:keys=common_pid.execname:vals=hitcount:sort=hitcount.descending' > $T/events/kprobes/clock_read/trigger
        echo 'hist:keys=stacktrace:vals=hitcount:sort=hitcount.descending' >> $T/events/kprobes/clock_read/trigger 2>/dev/null ||
            echo "@nsw warn missing=hist_stacktrace"
        echo 1 > $T/events/kprobes/clock_read/enable
    fi
    if [ "$TRACE_FAULTS" = 1 ]; then
        echo 16384 > $T/buffer_size_kb 2>/dev/null
        if echo 'p:numa_fault_all task_numa_fault last_cpupid=%di:s32 mem_node=%si:s32 pages=%dx:s32 flags=%cx:u32' >> $T/kprobe_events 2>/dev/null; then
            echo 1 > $T/events/kprobes/numa_fault_all/enable
        else
            echo "@nsw warn missing=kprobe_numa_fault_all"
        fi
        # who moves the per-CPU LRU add batches to the LRU, and how full they were (a folio
        # waiting there cannot be isolated for migration): counted per caller and CPU
        if echo 'p:lru_move folio_batch_move_lru nr=+0(%di):u8' >> $T/kprobe_events 2>/dev/null; then
            echo 'nr > 0' > $T/events/kprobes/lru_move/filter
            echo 1 > $T/events/kprobes/lru_move/enable
        else
            echo "@nsw warn missing=kprobe_folio_batch_move_lru"
        fi
        if echo 'p:numa_work task_numa_work w52=-52(%di):s32 w48=-48(%di):s32 w44=-44(%di):s32 w40=-40(%di):s32 w36=-36(%di):s32' >> $T/kprobe_events 2>/dev/null &&
           echo 'r:numa_work_end task_numa_work' >> $T/kprobe_events 2>/dev/null; then
            echo 1 > $T/events/kprobes/numa_work/enable
            echo 1 > $T/events/kprobes/numa_work_end/enable
        else
            echo "@nsw warn missing=kprobe_task_numa_work"
        fi
    fi
else
    echo "@nsw warn missing=tracefs"
fi
# the scheduler's view of the machine: sched domains per CPU (name, span, flags; the fork and
# wake-up placement rules depend on them) and which CPUs share the last-level cache
for c in /sys/devices/system/cpu/cpu[0-9]*; do
    n=${c##*cpu}
    for d in /sys/kernel/debug/sched/domains/cpu$n/domain*; do
        [ -e $d/name ] || continue
        echo "@nsw sd cpu=$n level=${d##*domain} name=$(cat $d/name) flags=$(cat $d/flags 2>/dev/null | tr ' ' ',' | sed 's/,$//')"
    done
    llc=$(ls -d $c/cache/index* 2>/dev/null | tail -1)
    [ -n "$llc" ] && echo "@nsw llc cpu=$n level=$(cat $llc/level) shared=$(cat $llc/shared_cpu_list)"
done
# tiering runs: each node's free memory made the scenario's node size (the VM's nodes are
# bigger by room for the guest kernel; the excess goes to the 2 MiB hugetlb pool). Free pages
# are MemFree and the pages on the per-CPU lists, which MemFree leaves out (tens of MiB after
# the calibration's buffers are freed) but an allocation takes first.
pcp_kb() {
    awk -v n="$1," '/^Node/ {cur = ($2 == n)} cur && $1 == "count:" {s += $2} END {print s * 4}' /proc/zoneinfo
}
for s in $RESERVE; do
    n=${s%%:*}
    d=/sys/devices/system/node/node$n
    want=$((${s#*:} * 1024))
    pcp=$(pcp_kb $n)
    free=$(($(awk '/MemFree/ {print $4}' $d/meminfo) + pcp))
    huge=$(((free - want) / 2048))
    if [ $huge -gt 0 ]; then echo $huge > $d/hugepages/hugepages-2048kB/nr_hugepages; fi
    echo "@nsw reserve node=$n free_kb=$free pcp_kb=$pcp want_kb=$want huge_2m=$(cat $d/hugepages/hugepages-2048kB/nr_hugepages 2>/dev/null) free_after_kb=$(($(awk '/MemFree/ {print $4}' $d/meminfo) + $(pcp_kb $n)))"
done
# the runner writes to tmpfs while the workload runs, and the console gets it afterwards: a
# console line costs a vCPU milliseconds under TCG, and a runner still writing when the
# workload forks changes where the kernel places the fork (docs/realkernel.md)
/bin/numaw run /scenario.txt interval_ms=$INTERVAL_MS mem_ms=$MEM_MS maps_ms=$MAPS_MS place_ms=$PLACE_MS max_s=$MAX_S > /tmp/run.out 2>&1
rc=$?
cat /tmp/run.out
if [ -d $T/events/sched ]; then
    echo 0 > $T/tracing_on
    awk '/^#/ {next}
         /: [a-z_]+: / {
             if (!match($0, / [0-9]+\.[0-9]+: [a-z_]+: /)) next
             head = substr($0, RSTART + 1, RLENGTH - 3); split(head, h, ": ")
             ts = h[1]; ev = h[2]; sub(/^sched_/, "", ev)
             rest = substr($0, RSTART + RLENGTH); sub(/^\([^)]*\) */, "", rest)
             task = $1; sub(/.*-/, "", task)
             if (ev == "skip_vma_numa") { r = rest; sub(/.*reason=/, "", r); sub(/ .*/, "", r); skip[r]++ }
             if (ev == "lru_move") {
                 comm = $1; sub(/-[0-9]+$/, "", comm)
                 cpu = $2; gsub(/[^0-9]/, "", cpu)
                 nr = rest; sub(/.*nr=/, "", nr); sub(/ .*/, "", nr)
                 lk = comm " " (cpu + 0) " " int(ts)
                 lru[lk]++; lrun[lk] += nr; cnt[ev]++
                 next
             }
             if (ev == "numa_fault_all") {
                 split(rest, kv, " "); lc = -1; fl = 0; np = 1
                 for (i in kv) { split(kv[i], q, "=")
                     if (q[1] == "last_cpupid") lc = q[2] + 0; else if (q[1] == "flags") fl = q[2] + 0; else if (q[1] == "pages") np = q[2] + 0 }
                 lp = ((lc % 256) + 256) % 256
                 cls = (lp == 255) ? "first" : ((lp == (task % 256)) ? "own" : "other")
                 key = task " " int(ts * 100) " " (int(fl / 8) % 2) " " cls " " (fl % 2) " " (int(fl / 16) % 2)
                 agg[key] += np; cnt[ev]++
                 next
             }
             cnt[ev]++
             if ((ev == "numa_fault_fail" && cnt[ev] > 300) || (ev == "skip_vma_numa" && cnt[ev] > 1000)) next
             n++; if (n > 6000) next
             print "@nsw trace ts=" ts " task=" task " event=" ev " " rest }
         END { for (r in skip) print "@nsw skipvma reason=" r " n=" skip[r]
               for (k in lru) { split(k, a, " ")
                   print "@nsw lrumove comm=" a[1] " cpu=" a[2] " s=" a[3] " calls=" lru[k] " folios=" lrun[k] }
               for (k in agg) { split(k, a, " ")
                   print "@nsw faultagg task=" a[1] " ts=" a[2] / 100 " local=" a[3] " last=" a[4] " migrated=" a[5] " failed=" a[6] " n=" agg[k] }
               for (e in cnt) print "@nsw tracecount event=" e " n=" cnt[e]
               if (n > 6000) print "@nsw warn trace_lines_dropped=" n - 6000 }' $T/trace
fi
if [ -e $T/events/kprobes/clock_read/hist ]; then
    echo 0 > $T/events/kprobes/clock_read/enable
    grep -v '^#' $T/events/kprobes/clock_read/hist | grep -v '^ *$' | head -600 | sed 's/^/@nsw khist /'
fi
echo "@nsw done rc=$rc"
poweroff -f
"""


WORKLOAD_SRC = Path(__file__).resolve().parent / "workloads"  # the C sources, shipped in the package
GCC_FLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-static", "-pthread"]  # as the Makefile


def numaw_path() -> Path:
    """The static C workload program `numaw`: $NUMASIM_NUMAW; in the source tree
    build/realkernel/numaw, (re)built with `make workloads`; else built on first use from the C
    sources shipped in the package (realkernel/workloads/) into the cache."""
    env = os.environ.get("NUMASIM_NUMAW")
    if env:
        return Path(env)
    exe = REPO / "build" / "realkernel" / "numaw"
    if (REPO / "Makefile").exists() and (REPO / "python" / "numasim").is_dir():
        if shutil.which("gcc") is None and not exe.exists():
            raise RealKernelError(f"gcc is needed to build the C workloads ({WORKLOAD_SRC}); " + SETUP_HINT)
        p = subprocess.run(["make", "-s", "-C", str(REPO), "workloads"], capture_output=True, text=True)
        if p.returncode != 0:
            raise RealKernelError("building the C workloads failed: " + (p.stderr.strip().splitlines() or ["?"])[-1])
        if not exe.exists():
            raise RealKernelError(f"{exe} is missing: run `make workloads`")
        return exe
    return build_numaw(cache_root() / "numaw")


def build_numaw(directory: Path) -> Path:
    """`numaw` compiled from the shipped sources into ``directory`` (once per version of the
    sources: the file name carries their hash); RealKernelError saying what is missing."""
    import hashlib

    sources = sorted(WORKLOAD_SRC.glob("*.c")) + sorted(WORKLOAD_SRC.glob("*.h"))
    if not sources:
        raise RealKernelError(f"the C workload sources are missing from {WORKLOAD_SRC}: reinstall numasim")
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    exe = directory / f"numaw-{digest}"
    if exe.exists():
        return exe
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RealKernelError(f"gcc is needed to build numasim's C workloads (the sources are in {WORKLOAD_SRC}): "
                              "install gcc and the static C library (Debian: apt-get install gcc libc6-dev)")
    directory.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_name(f".{exe.name}.{os.getpid()}")
    cmd = [gcc, *GCC_FLAGS, "-o", str(tmp), *map(str, (p for p in sources if p.suffix == ".c")), "-lm"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        tmp.unlink(missing_ok=True)
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        raise RealKernelError(f"building the C workloads with gcc failed: {last} (a static build needs the "
                              "C library's static files: Debian libc6-dev)")
    os.replace(tmp, exe)
    return exe


def busybox_path() -> Path:
    for p in BUSYBOX_PATHS:
        if Path(p).exists():
            out = subprocess.run(["file", "-L", p], capture_output=True, text=True).stdout \
                if shutil.which("file") else "statically linked"
            if "statically linked" in out or "static-pie" in out:
                return Path(p)
    raise RealKernelError("no static busybox found (Debian package busybox-static); " + SETUP_HINT)


def trace_filter(spec_lines: list) -> str:
    """ftrace filter of sched_migrate_task: the workloads' threads, by comm (numaw names each
    process after its kind; the kernel keeps 15 characters)."""
    kinds = sorted({ln.split()[0][:15] for ln in spec_lines if ln.strip() and not ln.lstrip().startswith("#")})
    return " || ".join(f'comm == "{k}"' for k in kinds) or "pid == 0"


def config_text(settings: dict, interval_ms: int, max_s: float, comms: str = "pid == 0", mem_ms: int | None = None,
                maps_ms: int | None = None, calibrate: bool = False, run: bool = True, place_ms: int = 0,
                trace_faults: bool = False, kernel_profile: bool = False) -> str:
    mthp = " ".join(f"{kb}:{v}" for kb, v in sorted(settings.get("mthp", {}).items()))
    lines = {
        "NUMA_BALANCING": settings["numa_balancing"],
        "scan_delay_ms": settings["scan_delay_ms"],
        "scan_period_min_ms": settings["scan_period_min_ms"],
        "scan_period_max_ms": settings["scan_period_max_ms"],
        "scan_size_mb": settings["scan_size_mb"],
        "RESERVE": '"' + " ".join(f"{i}:{m}" for i, m in enumerate(settings.get("free_mib", []))) + '"',
        "TIERING": '"' + " ".join(f"{','.join(specmod.TIERING_PATHS[k])}={v}"
                                  for k, v in settings.get("tiering", {}).items()) + '"',
        "THP_ENABLED": settings["thp_enabled"],
        "MTHP": f'"{mthp}"',
        "INTERVAL_MS": int(interval_ms),
        "MEM_MS": int(mem_ms or interval_ms),
        "MAPS_MS": int(maps_ms or mem_ms or interval_ms),
        "PLACE_MS": int(place_ms),
        "MAX_S": f"{max_s:.1f}",
        "WORKLOAD_COMMS": "'" + comms.replace("'", "") + "'",
        "CALIBRATE": int(calibrate),
        "RUN": int(run),
        "TRACE_FAULTS": int(trace_faults),
        "KERNEL_PROFILE": int(kernel_profile),
    }
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def build_initramfs(out: Path, spec_lines: list, settings: dict, interval_ms: int = 100,
                    max_s: float = 300.0, numaw: Path | None = None, busybox: Path | None = None,
                    mem_ms: int | None = None, maps_ms: int | None = None, calibrate: bool = False,
                    run: bool = True, place_ms: int = 0, trace_faults: bool = False,
                    kernel_profile: bool = False) -> Path:
    """Write a gzip'd newc cpio with /init, /config, /scenario.txt, /bin/busybox, /bin/numaw
    (the archive is made by `busybox cpio`: the host needs no cpio)."""
    numaw = numaw or numaw_path()
    busybox = busybox or busybox_path()
    with tempfile.TemporaryDirectory(prefix="numasim-initramfs-") as tmp:
        root = Path(tmp)
        for d in ("bin", "dev", "proc", "sys", "tmp", "sbin", "usr/bin", "usr/sbin"):
            (root / d).mkdir(parents=True, exist_ok=True)
        shutil.copy2(busybox, root / "bin" / "busybox")
        shutil.copy2(numaw, root / "bin" / "numaw")
        os.symlink("busybox", root / "bin" / "sh")
        (root / "init").write_text(INIT)
        (root / "init").chmod(0o755)
        (root / "config").write_text(config_text(settings, interval_ms, max_s, trace_filter(spec_lines), mem_ms, maps_ms,
                                                   calibrate, run, place_ms, trace_faults, kernel_profile))
        (root / "scenario.txt").write_text("\n".join(spec_lines) + "\n")
        names = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, root)
            if rel != ".":
                names.append(rel)
            names += [os.path.normpath(os.path.join(rel, f)) for f in sorted(filenames)]
        p = subprocess.run([str(busybox), "cpio", "-o", "-H", "newc"], cwd=root,
                           input=("\n".join(names) + "\n").encode(), capture_output=True)
        if p.returncode != 0 or not p.stdout:
            raise RealKernelError("busybox cpio failed: " + p.stderr.decode(errors="replace").strip())
        out.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(out, "wb", compresslevel=6) as f:
            f.write(p.stdout)
    return out


def hmat_options(topo: dict) -> list:
    """-numa hmat-lb entries (ACPI HMAT) from the scenario's cost profile: for every initiator
    (node with CPUs) and every memory node, the access latency (ns, latency_ns[cpu][mem]) and
    bandwidth (MiB/s, the memory node's node_bandwidth_gibps). The kernel needs both for the
    first DRAM node too: without a reference it keeps every node at the DRAM distance."""
    lat, bw = topo["hmat"]["latency_ns"], topo["hmat"]["bandwidth_gibps"]
    cmd = []
    for i in topo.get("cpu_nodes", range(topo["nodes"])):
        for j in range(topo["nodes"]):
            base = f"hmat-lb,initiator={i},target={j},hierarchy=memory"
            cmd += ["-numa", f"{base},data-type=access-latency,latency={max(1, round(lat[i][j]))}",
                    "-numa", f"{base},data-type=access-bandwidth,bandwidth={max(1, round(bw[j] * 1024))}M"]
    return cmd


def qemu_command(topo: dict, kernel: Path, initrd: Path, append: str = "") -> list:
    """qemu-system-x86_64 with one NUMA node per scenario node: CPUs, memory and distances. A
    node without CPUs is memory only; with machine.hmat the machine gets an HMAT (hmat=on, each
    memory-only node's initiator its nearest CPU node, hmat-lb latencies and bandwidths)."""
    n, per, smt = topo["nodes"], topo["cpus_per_node"], topo["smt"]
    cpu_nodes = topo.get("cpu_nodes", list(range(n)))
    initiator = topo.get("initiator", {})
    hmat = "hmat" in topo
    mem_mib = topo.get("vm_mib", topo["mem_mib"])
    total = sum(mem_mib)
    cmd = [QEMU, "-accel", "tcg,thread=multi", "-cpu", "max", "-m", f"{total}M",
           "-smp", f"{len(cpu_nodes) * per},sockets={len(cpu_nodes)},cores={per // smt},threads={smt}",
           "-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio", "-monitor", "none",
           "-net", "none", "-no-reboot"]
    if hmat:
        cmd += ["-machine", "hmat=on"]
    for i, mib in enumerate(mem_mib):
        node = f"node,nodeid={i},memdev=m{i}"
        if hmat and i in initiator:
            node += f",initiator={initiator[i]}"
        cmd += ["-object", f"memory-backend-ram,id=m{i},size={mib}M", "-numa", node]
    for socket, i in enumerate(cpu_nodes):
        cmd += ["-numa", f"cpu,node-id={i},socket-id={socket}"]
    for i in range(n):
        for j in range(n):
            if i != j:
                cmd += ["-numa", f"dist,src={i},dst={j},val={topo['distance'][i][j]}"]
    if hmat:
        cmd += hmat_options(topo)
    cmd += ["-kernel", str(kernel), "-initrd", str(initrd),
            # sched_verbose: 6.4+ lists the sched domains in debugfs only with it (the init script
            # records them in source.topology)
            "-append", ("console=ttyS0 panic=-1 quiet sched_verbose " + append).strip()]
    return cmd


def describe(topo: dict) -> str:
    """"2 nodes x 2 CPUs", or "2 nodes: 1 x 2 CPUs + 1 memory-only, HMAT"."""
    n, per = topo["nodes"], topo["cpus_per_node"]
    cpu = len(topo.get("cpu_nodes", range(n)))
    text = f"{n} nodes x {per} CPUs" if cpu == n else f"{n} nodes: {cpu} x {per} CPUs + {n - cpu} memory-only"
    return text + (", HMAT" if "hmat" in topo else "")


def qemu_version() -> str:
    exe = shutil.which(QEMU)
    if exe is None:
        raise RealKernelError(f"{QEMU} not found; " + SETUP_HINT)
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else "?"


def boot(cmd: list, log_path: Path, timeout_s: float, log=None) -> tuple:
    """Run QEMU until it exits or timeout_s; the console goes to log_path. (text, wall_s)."""
    log = log or (lambda m: None)
    t0 = time.monotonic()
    with open(log_path, "wb") as logf:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            text = log_path.read_text(errors="replace")
            tail = " | ".join(text.strip().splitlines()[-3:])
            raise RealKernelError(f"the VM did not finish within {timeout_s:.0f} s (killed); "
                                  f"console: {log_path}; last lines: {tail}") from None
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    wall = time.monotonic() - t0
    text = log_path.read_text(errors="replace")
    if proc.returncode != 0:
        tail = " | ".join(text.strip().splitlines()[-3:])
        raise RealKernelError(f"qemu exited with status {proc.returncode}: {tail}")
    return text, wall


def expected_run_s(resolved: dict) -> float:
    """A rough guest-time budget: the longest start_s + duration_s / free_at_s (a program's
    longest chain of ops), at least 30 s."""
    t = 0.0
    for w in resolved["workloads"]:
        end = float(w.get("start_s", 0)) + float(w.get("duration_s", 0) or 0)
        if w.get("kind") == "program":
            end += specmod.program_duration_s(w)
        end = max(end, float(w.get("free_at_s", 0) or 0))
        end += float(w.get("interval_s", 0) or 0) * 2 * int(w.get("loops", 1) or 1)
        t = max(t, end)
    return max(30.0, 3 * t)


CALIBRATE_S = 150.0  # wall seconds `numaw calibrate` may take under TCG (~20-40 s measured)


def _kernel_image(kernel: str, vmlinuz, kernel_info, log):
    if vmlinuz is None:
        info = fetch_kernel(kernel, log=log)
        return Path(info["vmlinuz"]), info
    return Path(vmlinuz), kernel_info or {"release": Path(vmlinuz).name, "package": "custom", "version": "?"}


def _boot_with_retries(cmd: list, workdir: Path, timeout_s: float, log) -> tuple:
    """Boot; a guest that panics before init runs is booted again. (text, wall_s, parsed, retries)"""
    # MTTCG occasionally breaks the kernel's live code patching during boot (an "Oops: int3" in
    # a timer interrupt before init runs): such a boot is retried; a panic after init is an error.
    retries = []
    for attempt in range(BOOT_ATTEMPTS):
        text, wall = boot(cmd, workdir / "console.log", timeout_s, log)
        parsed = parse_console(text)
        if not (parsed["panic"] and parsed["begin"] is None and not parsed["calibration"]) \
                or attempt == BOOT_ATTEMPTS - 1:
            break
        retries.append(parsed["panic"])
        (workdir / f"console.boot{attempt + 1}-panic.log").write_text(text)
        log(f"the guest panicked while booting ({parsed['panic'].strip()}); booting again")
    return text, wall, parsed, retries


def run_vm(resolved: dict, kernel: str = "6.12", *, timeout_s: float | None = None, workdir: Path | None = None,
           vmlinuz: Path | None = None, kernel_info: dict | None = None, log=None, calibrate: bool = False,
           trace_faults: bool = False, kernel_profile: bool = False):
    """Boot kernel `kernel` with the scenario's topology, run its workloads, return a Result
    (source = {"kind": "qemu", ...}). The console log is kept in workdir/console.log. With
    `calibrate`, `numaw calibrate` runs first in the same boot (source.calibration); with
    `trace_faults`, every hint fault is traced (result `fault_kinds`, `numa_work` events); with
    `kernel_profile`, the guest boots with profile=2 (result `kernel_profile`, runner kprofile.c)."""
    log = log or (lambda m: None)
    qv = qemu_version()
    vmlinuz, info = _kernel_image(kernel, vmlinuz, kernel_info, log)
    topo = specmod.guest_memory(specmod.topology(resolved), resolved)
    lines = specmod.workload_lines(resolved)
    settings = {**specmod.kernel_settings(resolved), "free_mib": topo.get("free_mib", [])}
    if settings["hz"] != 250:
        log(f"note: the scenario's HZ={settings['hz']}, Debian kernels use 250")
    run_s = expected_run_s(resolved)
    max_s = min(float(resolved.get("run", {}).get("max_sim_s", 7200)), run_s * 3)
    timeout_s = timeout_s or (90 + 3 * max_s + (CALIBRATE_S if calibrate else 0))
    interval, mem_ms, maps_ms = specmod.sample_intervals(resolved)
    workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="numasim-vm-"))
    workdir.mkdir(parents=True, exist_ok=True)
    initrd = build_initramfs(workdir / "initrd.img", lines, settings, interval, max_s, mem_ms=mem_ms, maps_ms=maps_ms,
                             calibrate=calibrate, place_ms=specmod.place_interval(resolved, mem_ms),
                             trace_faults=trace_faults, kernel_profile=kernel_profile)
    cmd = qemu_command(topo, vmlinuz, initrd, "profile=2" if kernel_profile else "")
    (workdir / "qemu.cmd").write_text(" ".join(cmd) + "\n")
    log(f"booting {info.get('release')} ({describe(topo)}, TCG), time limit {timeout_s:.0f} s")
    text, wall, parsed, retries = _boot_with_retries(cmd, workdir, timeout_s, log)
    if parsed["done"] is None and parsed["end"] is None and parsed["panic"] is None:
        tail = " | ".join(text.strip().splitlines()[-3:])
        raise RealKernelError(f"the guest stopped without finishing the run; console {workdir / 'console.log'}: {tail}")
    if calibrate and not parsed["calibration"]:
        raise RealKernelError(f"`numaw calibrate` printed no measurement; console {workdir / 'console.log'}")
    source = {"kind": "qemu", "kernel": info.get("release"), "package": info.get("package"),
              "package_version": info.get("version"), "kernel_choice": kernel, "accel": "tcg",
              "qemu": qv, "wall_s": round(wall, 3), "boot_uptime_s": parsed["boot"].get("uptime"),
              "warnings": parsed["warnings"], "boot_panics_retried": retries,
              "console": str(workdir / "console.log")}
    try:
        return build_result(parsed, resolved, source)
    except RealKernelError as exc:
        raise RealKernelError(f"{exc.msg} (console: {workdir / 'console.log'})") from None


def calibrate_vm(resolved: dict, kernel: str = "6.12", *, timeout_s: float | None = None,
                 workdir: Path | None = None, log=None) -> dict:
    """Boot kernel `kernel` with the scenario's topology and run only `numaw calibrate`:
    {"calibration": {name: value}, "kernel": release, "qemu": ..., "wall_s": ..., "warnings": [...]}."""
    log = log or (lambda m: None)
    qv = qemu_version()
    vmlinuz, info = _kernel_image(kernel, None, None, log)
    topo = specmod.topology(resolved)
    workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="numasim-cal-"))
    workdir.mkdir(parents=True, exist_ok=True)
    initrd = build_initramfs(workdir / "initrd.img", [], specmod.kernel_settings(resolved), calibrate=True, run=False)
    cmd = qemu_command(topo, vmlinuz, initrd)
    timeout_s = timeout_s or (90 + CALIBRATE_S)
    log(f"booting {info.get('release')} to calibrate ({topo['nodes']} nodes x {topo['cpus_per_node']} CPUs, TCG), "
        f"time limit {timeout_s:.0f} s")
    text, wall, parsed, _ = _boot_with_retries(cmd, workdir, timeout_s, log)
    cal = parsed["calibration"]
    if parsed["done"] is None or not cal or "wall_s" not in cal:
        tail = " | ".join(text.strip().splitlines()[-3:])
        raise RealKernelError(f"`numaw calibrate` did not finish; console {workdir / 'console.log'}: {tail}")
    return {"calibration": cal, "kernel": info.get("release"), "kernel_choice": kernel, "qemu": qv,
            "wall_s": round(wall, 3), "warnings": parsed["warnings"], "console": str(workdir / "console.log")}


__all__ = ["run_vm", "calibrate_vm", "build_initramfs", "qemu_command", "boot", "numaw_path", "busybox_path", "choice", "cache_root"]

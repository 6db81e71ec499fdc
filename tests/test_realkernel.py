"""Real-kernel backend without booting anything: console parsing, results, the initramfs, the
QEMU command line, the C workloads' parameters, and clear failures (no QEMU, apt failure,
guest panic, timeout, single-node host). The VM boots are in test_realkernel_vm.py."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import numasim
from numasim.realkernel import compare, host, kernels, spec, vm
from numasim.realkernel.console import build_result, parse_console
from numasim.realkernel.errors import RealKernelError
from numasim.realkernel.validate import scenario_dict, scenario_path, shipped
from numasim.scenario import to_toml

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "realkernel" / "remote-toucher-4k-6.12.console"
NEEDS_GCC = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc (system-packages.txt) is not installed")
NEEDS_BUSYBOX = pytest.mark.skipif(not any(Path(p).exists() for p in vm.BUSYBOX_PATHS),
                                   reason="busybox-static (system-packages.txt) is not installed")


def resolved(name="remote-toucher-4k", kernel="6.12", overrides=None):
    return numasim.resolve(to_toml(scenario_dict(name, kernel, overrides)))


@pytest.fixture(scope="module")
def numaw():
    if shutil.which("gcc") is None:
        pytest.skip("gcc (system-packages.txt) is not installed")
    return vm.numaw_path()


# ---------------------------------------------------------------- console -> result


def test_captured_console_gives_exact_counters():
    p = parse_console(FIXTURE.read_text())
    r = build_result(p, resolved(), {"kind": "qemu", "kernel": "6.12.95+deb12-amd64", "accel": "tcg"})
    c = r.counters
    # end snapshot minus begin snapshot of /proc/vmstat in the captured 6.12 run
    assert c["numa_pte_updates"] == 32786
    assert c["numa_hint_faults"] == 33918
    assert c["numa_hint_faults_local"] == 16371
    assert c["numa_pages_migrated"] == 16374
    assert c["pgmigrate_success"] == 16374
    assert c["pgfault"] == 67743 - 589
    assert "nr_free_pages" not in c  # a gauge, not an event counter
    assert "nr_tlb_remote_flush" not in c  # stock kernels have no CONFIG_DEBUG_TLBFLUSH
    assert r.interrupts["TLB"] == {"per_cpu": [2, 0, 548, 601], "total": 1151}
    assert r.times["elapsed_s"] == pytest.approx(6.685)
    assert r.times["user_s"] == pytest.approx(9.740)
    assert r.times["system_s"] == pytest.approx(2.828)
    assert r.raw["source"]["kind"] == "qemu"
    assert r.processes[0]["comm"] == "remote_toucher" and r.processes[0]["passes"] == 946
    assert compare.scan_windows(r) == 2
    # the node-1 workers pulled the whole buffer over: last sample holds it all on node 1
    mem = r.memory
    last = mem[mem.time_s == mem.time_s.max()].set_index("node")["pages"]
    assert last[1] >= 16384 and last[0] < 64
    r.check_invariants()


def test_result_round_trips_through_result_load(tmp_path):
    p = parse_console(FIXTURE.read_text())
    r = build_result(p, resolved(), {"kind": "qemu", "kernel": "x", "accel": "tcg"})
    r.save(tmp_path / "vm.json")
    back = numasim.Result.load(tmp_path / "vm.json")
    assert back.counters == r.counters
    assert list(back.vmstat.columns)[:2] and back.vmstat.index.name == "time_s"
    assert back.vmstat["numa_pte_updates"].iloc[-1] == 32786


def test_interleaved_kernel_messages_and_cut_lines_are_skipped():
    text = FIXTURE.read_text()
    noisy = text.replace("@nsw irq t=2.001", "[    5.1] random: crng init done\n@nsw irq t=2.001")
    noisy += "\n@nsw v t=\n@nsw mem t=1.0\n"
    p = parse_console(noisy)
    assert p["skipped"] == 2
    r = build_result(p, resolved(), {"kind": "qemu"})
    assert r.counters["numa_pages_migrated"] == 16374


def test_tlb_line_with_7x_leading_space(numaw, tmp_path):
    f = tmp_path / "interrupts"
    f.write_text("            CPU0       CPU1       CPU2\n"
                 "   0:         44          0          0   IO-APIC   2-edge      timer\n"
                 " TLB:        120         37          5   TLB shootdowns\n"  # 7.3 layout
                 " HYP:          0          0          0   Hypervisor callback interrupts\n")
    out = subprocess.run([str(numaw), "tlb", str(f)], capture_output=True, text=True).stdout
    assert out.strip() == "@nsw irq total=162 tlb=120,37,5"
    f.write_text("           CPU0       CPU1\nTLB:          7          9   TLB shootdowns\n")  # 6.x layout
    out = subprocess.run([str(numaw), "tlb", str(f)], capture_output=True, text=True).stdout
    assert out.strip() == "@nsw irq total=16 tlb=7,9"
    f.write_text("           CPU0\n  0:  1  IO-APIC timer\n")
    p = subprocess.run([str(numaw), "tlb", str(f)], capture_output=True, text=True)
    assert p.returncode == 1 and "total=-1" in p.stdout


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("@nsw end ", "@nsw xend "), "did not finish"),
    (lambda t: t + "\n[    9.9] Kernel panic - not syncing: Fatal exception\n", "kernel panic"),
    (lambda t: t.replace("status=0", "status=2"), "exited with status 2"),
    (lambda t: t.replace("@nsw start", "@nsw error w=0 remote_toucher: node 1 does not exist\n@nsw start", 1),
     "node 1 does not exist"),
])
def test_incomplete_or_failed_runs_raise(edit, message):
    p = parse_console(edit(FIXTURE.read_text()))
    with pytest.raises(RealKernelError, match=message):
        build_result(p, resolved(), {"kind": "qemu"})


# ---------------------------------------------------------------- scenario -> guest


def test_every_shipped_scenario_resolves_to_the_vm_machine():
    names = shipped()
    for base in ("numa02-small", "remote-toucher", "migratepages"):
        assert f"{base}-4k" in names and f"{base}-thp" in names
    for n in names:
        r = resolved(n)
        t = spec.topology(r)
        if n.startswith("tiering-"):  # a DRAM node with the CPUs and a memory-only slow node
            assert (t["cpus_per_node"], t["cpu_nodes"], t["mem_mib"]) == (2, [0], [512, 512]) and "hmat" in t, n
            assert spec.kernel_settings(r)["numa_balancing"] == 2, n
        else:
            assert t == {"nodes": 2, "cpus_per_node": 2, "smt": 1, "mem_mib": [2048, 2048],
                         "distance": [[10, 20], [20, 10]]}, n
        thp = spec.kernel_settings(r)["thp_enabled"]
        assert thp == ("never" if n.endswith("-4k") else "always"), n


def test_kernel_choice_sets_the_simulated_profile():
    assert scenario_dict("numa02-small-4k", "6.1")["kernel"]["version"] == "6.1"
    assert scenario_dict("numa02-small-4k", "6.12")["kernel"]["version"] == "6.12"
    assert scenario_dict("numa02-small-4k", "7.3")["kernel"]["version"] == "7.3"
    with pytest.raises(RealKernelError, match="unknown kernel"):
        kernels.choice("5.4")
    with pytest.raises(RealKernelError, match="shipped"):
        scenario_path("no-such-scenario")


def test_workload_lines_match_the_simulators_parameters():
    r = resolved("migratepages-thp")
    assert spec.workload_lines(r) == [  # the toucher's defaults (processes, mapping) are echoed too
        "remote_toucher size_mib=32 threads=2 local_threads=0 touch_node=0 run_node=1 duration_s=25.0 madvise=hugepage"
        " processes=1 mapping=private start_s=0.0",
        "migratepages target=0 from=0 to=1 loops=1 interval_s=0.5 start_s=2.0",
    ]
    r = resolved("numa02-small-4k", overrides=[("workload", [
        {"kind": "pmbench", "duration_s": 1.0, "nodes": [1], "pattern": "normal_ih"},
        {"kind": "memory_eater", "size_gib": 0.25, "free_at_s": 2.0, "node": 1},
        {"kind": "numa01_THREAD_ALLOC", "size_mib": 8, "passes": 2},
        {"kind": "move_pages", "target": 2, "node": 0, "first_mib": 1},
    ])])
    lines = spec.workload_lines(r)
    assert lines[0].startswith("pmbench processes=1 threads=1 set_mib=128 map_mib=256 pattern=normal_ih ")
    assert " nodes=1 " in lines[0] and " duration_s=1.0 " in lines[0]
    assert lines[1] == "memory_eater size_gib=0.25 node=1 start_s=0.0 free_at_s=2.0"
    assert lines[2] == "numa01_THREAD_ALLOC threads=2 size_mib=8 passes=2 start_s=0.0"
    assert lines[3] == "move_pages target=2 node=0 first_mib=1 loops=1 interval_s=0.0 start_s=0.0"
    xfs = resolved(overrides=[("workload", [{"kind": "xfs_repair", "work_s": 1.0}])])
    with pytest.raises(RealKernelError, match="no real-kernel program"):
        spec.workload_lines(xfs)


def test_remote_toucher_processes_and_mapping_reach_the_c_program():
    # a resolved workload as the engine echoes it (no engine needed: spec.py reads the dict)
    w = {"kind": "remote_toucher", "size_mib": 64, "threads": 1, "local_threads": 1, "touch_node": 0, "run_node": 1,
         "duration_s": 30.0, "madvise": "none", "processes": 2, "mapping": "shmem", "start_s": 0.0}
    assert spec.workload_lines({"workloads": [w]}) == [
        "remote_toucher size_mib=64 threads=1 local_threads=1 touch_node=0 run_node=1 duration_s=30.0 madvise=none "
        "processes=2 mapping=shmem start_s=0.0"]
    older = {k: v for k, v in w.items() if k not in ("processes", "mapping")}  # an engine without them
    assert " processes=" not in spec.workload_lines({"workloads": [older]})[0]


def test_the_c_programs_accept_exactly_those_parameters(numaw, tmp_path):
    r = resolved("numa02-small-4k", overrides=[("workload", [
        {"kind": "remote_toucher", "duration_s": 1.0, "madvise": "nohugepage"},
        {"kind": "pmbench", "duration_s": 1.0, "nodes": [0, 1], "pattern": "pareto"},
        {"kind": "memory_eater", "size_gib": 0.25, "free_at_s": 2.0},
        {"kind": "numa01", "size_mib": 8}, {"kind": "numa02_SMT_INVERSE_BIND", "size_mib": 8},
        {"kind": "migratepages", "target": 0}, {"kind": "move_pages", "target": 0, "node": 1},
    ])])
    env = dict(os.environ, NSW_CHECK_ARGS="1")
    for line in spec.workload_lines(r):
        args = line.split() + (["pid=1"] if "target=" in line else [])
        p = subprocess.run([str(numaw), *args], capture_output=True, text=True, env=env)
        assert p.returncode == 0 and "@nsw args ok" in p.stdout, (line, p.stdout)
    bad = subprocess.run([str(numaw), "remote_toucher", "duration_s=1", "size=64"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown parameter size" in bad.stdout


def test_runner_on_this_host_samples_and_reaps(numaw, tmp_path):
    # any host has node 0: first touch and streaming both on it, 0.3 s
    s = tmp_path / "spec.txt"
    s.write_text("remote_toucher size_mib=4 touch_node=0 run_node=0 threads=1 duration_s=0.3\n")
    p = subprocess.run([str(numaw), "run", str(s), "interval_ms=50"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    parsed = parse_console(p.stdout)
    assert parsed["end"]["completed"] == 1 and parsed["exits"][0]["status"] == 0
    assert len(parsed["samples"]) >= 4 and parsed["mem"]
    assert sum(parsed["mem"][-1][3]) >= 1024  # 4 MiB resident, from numa_maps
    assert parsed["workload_lines"][-1]["passes"] >= 1


@pytest.mark.parametrize("mapping", ["shared", "shmem", "private"])
def test_two_processes_share_the_buffer_and_their_passes_add_up(numaw, tmp_path, mapping):
    # processes=2: the child streams from run_node, the parent from touch_node (both node 0 here)
    s = tmp_path / "spec.txt"
    s.write_text(f"remote_toucher size_mib=4 touch_node=0 run_node=0 threads=1 local_threads=1 duration_s=0.3 "
                 f"processes=2 mapping={mapping}\n")
    p = subprocess.run([str(numaw), "run", str(s), "interval_ms=50"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    parsed = parse_console(p.stdout)
    assert parsed["exits"][0]["status"] == 0
    streams = [wl for wl in parsed["workload_lines"] if wl.get("phase") == "stream"]
    assert sorted(wl["process"] for wl in streams) == [0, 1] and len({wl["pid"] for wl in streams}) == 2
    assert all(wl["passes"] >= 1 for wl in streams)
    r = build_result(parsed, resolved_scenario_stub(), {"kind": "host"})
    assert r.processes[0]["passes"] == sum(wl["passes"] for wl in streams)


@pytest.mark.parametrize("args, message", [
    (["mapping=shared", "madvise=hugepage"], "madvise=hugepage needs mapping=private"),
    (["mapping=file"], "mapping=file: expected private, shared or shmem"),
    (["processes=3", "mapping=shmem"], "processes=3: expected 1 or 2"),
])
def test_remote_toucher_refuses_what_the_engine_refuses(numaw, args, message):
    p = subprocess.run([str(numaw), "remote_toucher", "size_mib=4", "touch_node=0", "run_node=0", "threads=1",
                        "duration_s=0.1", *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and message in p.stdout, p.stdout


def test_runner_reads_numa_maps_every_maps_ms_and_reports_its_own_cost(numaw, tmp_path):
    # numa_maps walks every PTE: the runner reads it every maps_ms, the threads every mem_ms,
    # /proc/vmstat every interval
    s = tmp_path / "spec.txt"
    s.write_text("remote_toucher size_mib=4 touch_node=0 run_node=0 threads=1 duration_s=0.6\n")
    p = subprocess.run([str(numaw), "run", str(s), "interval_ms=50", "mem_ms=100", "maps_ms=300"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    parsed = parse_console(p.stdout)
    assert len(parsed["samples"]) >= 8 and 1 <= len(parsed["mem"]) <= 3
    end = parsed["end"]
    assert end["samples"] >= 8 and 0 <= end["mem_wall_s"] <= end["sample_wall_s"]  # %.3f: a 4 MiB walk may print 0
    r = build_result(parsed, resolved_scenario_stub(), {"kind": "host"})
    runner = r.raw["source"]["runner"]
    assert runner["samples"] == end["samples"] and runner["cpu_s"] >= 0


def resolved_scenario_stub():
    return {"workloads": [{"kind": "remote_toucher"}], "seed": 1}


@pytest.mark.parametrize("run, expect", [
    ({"sample_interval_ms": 100, "placement_interval_ms": 1000}, (100, 1000, 1000)),
    ({"sample_interval_ms": 100, "placement_interval_ms": 0}, (100, 1000, 1000)),  # off in the sim: 1 s here
    ({"sample_interval_ms": 200, "placement_interval_ms": 100}, (200, 200, 200)),  # never above vmstat's rate
    ({"sample_interval_ms": 500, "placement_interval_ms": 1000, "numa_maps_interval_ms": 10000}, (500, 1000, 10000)),
    ({"sample_interval_ms": 100, "placement_interval_ms": 1000, "numa_maps_interval_ms": 200}, (100, 1000, 1000)),
    ({"sample_interval_ms": 10}, (50, 1000, 1000)),
])
def test_sample_intervals_follow_the_scenarios_run_section(run, expect):
    assert spec.sample_intervals({"run": run}) == expect


@NEEDS_BUSYBOX
def test_initramfs_holds_init_config_scenario_and_static_binaries(numaw, tmp_path):
    r = resolved("migratepages-4k")
    img = vm.build_initramfs(tmp_path / "initrd.img", spec.workload_lines(r), spec.kernel_settings(r),
                             interval_ms=100, max_s=42.0)
    raw = gzip.decompress(img.read_bytes())
    listing = subprocess.run([str(vm.busybox_path()), "cpio", "-t"], input=raw, capture_output=True).stdout.decode()
    names = set(listing.split())
    assert {"init", "config", "scenario.txt", "bin/busybox", "bin/numaw", "bin/sh", "proc", "sys", "dev"} <= names
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run([str(vm.busybox_path()), "cpio", "-i", "-d"], input=raw, cwd=out, check=True, capture_output=True)
    assert os.access(out / "init", os.X_OK) and "numaw run /scenario.txt" in (out / "init").read_text()
    cfg = (out / "config").read_text()
    assert "INTERVAL_MS=100\n" in cfg and "MEM_MS=100\n" in cfg and "mem_ms=$MEM_MS" in (out / "init").read_text()
    assert "MAPS_MS=100\n" in cfg and "maps_ms=$MAPS_MS" in (out / "init").read_text()
    assert "NUMA_BALANCING=0\n" in cfg and "THP_ENABLED=never\n" in cfg and "MAX_S=42.0\n" in cfg
    assert "scan_delay_ms=1000\n" in cfg and '2048:inherit' in cfg
    assert (out / "scenario.txt").read_text().splitlines() == spec.workload_lines(r)
    assert (out / "bin" / "numaw").read_bytes() == numaw.read_bytes()
    for b in ("numaw", "busybox"):
        assert "statically linked" in subprocess.run(["file", str(out / "bin" / b)], capture_output=True,
                                                     text=True).stdout or shutil.which("file") is None


def test_qemu_command_has_the_scenarios_numa_topology(tmp_path):
    r = resolved("numa02-small-thp", overrides=[("machine.memory_gib_per_node", [1, 3]),
                                                ("machine.distances", [[10, 31], [31, 10]])])
    cmd = vm.qemu_command(spec.topology(r), Path("vmlinuz"), Path("initrd.img"))
    s = " ".join(cmd)
    assert "-accel tcg,thread=multi" in s and "-m 4096M" in s and "-smp 4,sockets=2,cores=2,threads=1" in s
    assert "memory-backend-ram,id=m0,size=1024M" in s and "memory-backend-ram,id=m1,size=3072M" in s
    assert "-numa node,nodeid=0,memdev=m0" in s and "-numa cpu,node-id=1,socket-id=1" in s
    assert "-numa dist,src=0,dst=1,val=31" in s and "-no-reboot" in s
    uneven = resolved(overrides=[("machine.cpus_per_node", [2, 4])])
    with pytest.raises(RealKernelError, match="same number of CPUs"):
        spec.topology(uneven)


# ---------------------------------------------------------------- failures are reported


def _fake_bin(tmp_path, name, script):
    d = tmp_path / "fakebin"
    d.mkdir(exist_ok=True)
    f = d / name
    f.write_text("#!/bin/sh\n" + script)
    f.chmod(0o755)
    return d


def test_no_qemu_is_reported_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RealKernelError, match="qemu-system-x86_64 not found.*make system-deps"):
        vm.run_vm(resolved(), "6.12", vmlinuz=tmp_path / "vmlinuz", workdir=tmp_path / "w")


def test_failed_download_is_reported(monkeypatch, tmp_path):
    d = _fake_bin(tmp_path, "apt-get", 'echo "E: Failed to fetch http://deb.debian.org/x  Could not resolve host" >&2\nexit 100\n')
    monkeypatch.setenv("PATH", f"{d}:{os.environ['PATH']}")
    with pytest.raises(RealKernelError, match="could not download kernel 6.1 .bookworm, bookworm-security.: apt-get update -q failed: E: Failed to fetch.*Could not resolve"):
        kernels.fetch_kernel("6.1", root=tmp_path / "cache")


def test_cached_kernel_needs_no_network(monkeypatch, tmp_path):
    kdir = tmp_path / "cache" / "kernels" / "6.12"
    kdir.mkdir(parents=True)
    (kdir / "vmlinuz").write_bytes(b"x")
    (kdir / "kernel.txt").write_text(f"vmlinuz={kdir / 'vmlinuz'}\npackage=p\nversion=1\nrelease=6.12.0-test\n")
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get at all
    info = kernels.fetch_kernel("6.12", root=tmp_path / "cache")
    assert info["release"] == "6.12.0-test" and info["vmlinuz"] == kdir / "vmlinuz"


@NEEDS_BUSYBOX
def test_guest_panic_and_timeout_are_reported(numaw, monkeypatch, tmp_path):
    panic = "[    2.0] Kernel panic - not syncing: VFS: Unable to mount root fs\n"
    d = _fake_bin(tmp_path, "qemu-system-x86_64",
                  'case "$*" in *--version*) echo "QEMU emulator version 7.2 (fake)"; exit 0;; esac\n'
                  f'[ -n "$FAKE_QEMU_SLEEP" ] && sleep $FAKE_QEMU_SLEEP\nprintf "{panic}"\n')
    monkeypatch.setenv("PATH", f"{d}:{os.environ['PATH']}")
    monkeypatch.setattr(vm, "BOOT_ATTEMPTS", 2)
    with pytest.raises(RealKernelError, match="kernel panic: .*Unable to mount root fs"):
        vm.run_vm(resolved(), "6.12", vmlinuz=tmp_path / "vmlinuz", workdir=tmp_path / "w1")
    assert (tmp_path / "w1" / "console.boot1-panic.log").exists()  # a boot panic is retried once
    monkeypatch.setenv("FAKE_QEMU_SLEEP", "30")
    with pytest.raises(RealKernelError, match="did not finish within 1 s"):
        vm.run_vm(resolved(), "6.12", vmlinuz=tmp_path / "vmlinuz", workdir=tmp_path / "w2", timeout_s=1)


def test_host_runner_refuses_a_single_node_host(tmp_path):
    one = tmp_path / "node"
    (one / "node0").mkdir(parents=True)
    (one / "node0" / "cpulist").write_text("0-3\n")
    with pytest.raises(RealKernelError, match="1 NUMA node.*at least 2 nodes.*numasim validate"):
        host.check_numa_host(str(one))
    with pytest.raises(RealKernelError, match="at least 2 nodes"):
        host.run_host(resolved(), sysfs=str(one))
    (one / "node1").mkdir()
    (one / "node1" / "cpulist").write_text("4-7\n")
    assert host.check_numa_host(str(one)) == {0: 4, 1: 4}


@pytest.mark.skipif(len(host.host_nodes()) >= 2, reason="this host has several NUMA nodes")
def test_hostrun_cli_refuses_here_with_one_error_line(tmp_path):
    scen = scenario_path("remote-toucher-4k")
    p = subprocess.run([sys.executable, "-m", "numasim", "hostrun", str(scen)], capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.startswith("error: ") and "NUMA machine" in p.stderr and len(p.stderr.splitlines()) == 1


# ---------------------------------------------------------------- comparison


def test_comparison_checks_per_window_and_per_call_quantities(tmp_path):
    r = build_result(parse_console(FIXTURE.read_text()), resolved(), {"kind": "qemu"})
    sim = numasim.run(to_toml(scenario_dict("remote-toucher-4k", "6.12")))
    cmp = compare.compare(sim, r)
    rows = {x["metric"]: x for x in cmp["rows"]}
    assert rows["numa_pte_updates_per_window"]["checked"] and not rows["numa_pte_updates"]["checked"]
    assert rows["numa_pages_migrated"]["vm"] == 16374
    assert rows["tlb_shootdown_ipis"]["vm"] == 1151
    assert compare.within(110, 100) and not compare.within(126, 100) and compare.within(0, 0)
    assert "numa_pages_migrated" in compare.table(cmp)


def test_validate_several_boots_against_one_simulation(tmp_path):
    # two saved boots (here the same console twice) of one kernel: each compared, then a
    # summary of how many boots each checked metric agreed in
    cmd = [sys.executable, "-m", "numasim", "validate", "remote-toucher-4k", "--kernel", "6.12", "-q", "--json",
           "--vm-result", str(FIXTURE), "--vm-result", str(FIXTURE), "--out", str(tmp_path)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert len(res["boots"]) == 2 and res["summary"]["boots"] == 2
    rows = res["summary"]["rows"]
    assert rows and all(r["of"] == 2 and r["agree"] in (0, 2) and r["vm"][0] == r["vm"][1] for r in rows)
    assert res["summary"]["ok"] == all(r["agree"] == 2 for r in rows)
    d = tmp_path / "remote-toucher-4k-6.12"
    assert (d / "sim.json").exists() and (d / "boots.json").exists()
    assert all((d / f"boot{i}" / "comparison.json").exists() for i in (1, 2))


def test_across_boots_counts_agreement_per_metric():
    def cmp(vm, ok):
        return {"rows": [{"metric": "scan_passes", "sim": 5.0, "vm": vm, "checked": True, "ok": ok},
                         {"metric": "elapsed_s", "sim": 40.0, "vm": 80.0, "checked": False, "ok": None}]}
    s = compare.across_boots([cmp(5.5, True), cmp(9.0, False), cmp(4.5, True)])
    assert [r["metric"] for r in s["rows"]] == ["scan_passes"]  # only checked metrics
    r = s["rows"][0]
    assert (r["vm"], r["agree"], r["of"], r["majority"], s["ok"]) == ([5.5, 9.0, 4.5], 2, 3, True, True)
    assert not compare.across_boots([cmp(9.0, False), cmp(5.5, True)])["ok"]  # 1 of 2 is no majority
    # validate --calibrate simulates each boot with its own costs: the sims are listed per boot
    own = [cmp(5.5, True), cmp(9.0, False)]
    own[1]["rows"][0]["sim"] = 6.0
    r = compare.across_boots(own)["rows"][0]
    assert r["sim"] == [5.0, 6.0] and "5.000, 6.000" in compare.boots_table(compare.across_boots(own))


@pytest.mark.parametrize("extra, message", [
    (["--boots", "0"], "--boots must be at least 1"),
    (["--kernel", "6.1", "--kernel", "6.12", "--vm-result", "x.log"], "one kernel"),
])
def test_validate_refuses_bad_boot_options(extra, message):
    p = subprocess.run([sys.executable, "-m", "numasim", "validate", "remote-toucher-4k", *extra],
                       capture_output=True, text=True)
    assert p.returncode != 0 and message in p.stderr and "Traceback" not in p.stderr


def test_hex_addresses_stay_text():
    # "4e6000" and "3379e000" read as numbers would be 4e6000 (inf) and 3379.0; JSON could not
    # even hold the first
    from numasim.realkernel.console import _fields
    f = _fields("t=2.003 start=4e6000 kib=16 vm_start=3379e000 vm_end=7F9839200000 numa_scan_offset=0")
    assert f == {"t": 2.003, "start": "4e6000", "kib": 16, "vm_start": "3379e000", "vm_end": "7F9839200000",
                 "numa_scan_offset": "0"}


def test_lru_batch_moves_are_kept_per_caller_cpu_and_second():
    # `validate --trace-faults`: the kprobe on folio_batch_move_lru, counted in the guest
    p = parse_console("@nsw lrumove comm=run cpu=3 s=11 calls=1 folios=15\n"
                      "@nsw lrumove comm=remote_toucher cpu=1 s=4 calls=1106 folios=16573\n")
    assert p["lrumove"] == [{"comm": "run", "cpu": 3, "s": 11, "calls": 1, "folios": 15},
                            {"comm": "remote_toucher", "cpu": 1, "s": 4, "calls": 1106, "folios": 16573}]


def test_named_interrupt_and_softirq_rows_are_kept_per_cpu():
    from numasim.realkernel import console

    text = "\n".join(["@nsw irqs phase=begin name=LOC counts=10,20,30,40",
                      "@nsw irqs phase=end name=LOC counts=110,220,30,40",
                      "@nsw irqs phase=end name=SCHED counts=7"])
    p = console.parse_console(text)
    assert p["irqs"] == {"begin": {"LOC": [10, 20, 30, 40]}, "end": {"LOC": [110, 220, 30, 40], "SCHED": [7]}}
    assert p["skipped"] == 0


def test_kernel_profile_lines_are_kept_and_tabulated():
    # `validate --kernel-profile`: the runner's /proc/profile histogram resolved by function
    # (kprofile.c) and the clocksource reads' hist-trigger lines, as printed by the guest
    text = "\n".join(["@nsw kprof sym=read_hpet hits=523", "@nsw kprof sym=pv_native_safe_halt hits=629",
                      "@nsw kprof sym=broken hits=many",
                      "@nsw kprof_total hits=1979 unresolved=0 step=4 buckets=4194304",
                      "@nsw khist { common_pid: program         [       241] } hitcount:      68669"])
    p = parse_console(text)
    assert p["kprof"]["rows"] == [{"sym": "read_hpet", "hits": 523}, {"sym": "pv_native_safe_halt", "hits": 629}]
    assert (p["kprof"]["hits"], p["kprof"]["step"], p["skipped"]) == (1979, 4, 1)
    assert p["kprof"]["clock_read_hist"] == ["{ common_pid: program         [       241] } hitcount:      68669"]
    table = compare.kernel_profile_table({"kernel_profile": p["kprof"]})
    row = next(ln for ln in table.splitlines() if ln.startswith("read_hpet"))
    assert row.split()[1:] == ["523", "26.4%", "2.09"]  # of all 1979 kernel-mode ticks, at HZ 250
    assert "(all kernel-mode ticks)" in table.splitlines()[-1] and "1979" in table.splitlines()[-1]


def test_kernel_profile_boots_with_profile_and_trace_faults_counts_clock_reads():
    resolved = numasim.resolve(to_toml(scenario_dict("remote-toucher-4k", "6.12")))
    settings = spec.kernel_settings(resolved) | {"free_mib": []}
    assert "KERNEL_PROFILE=1" in vm.config_text(settings, 100, 60, kernel_profile=True)
    assert "KERNEL_PROFILE=0" in vm.config_text(settings, 100, 60)
    # the clocksource's callers only with --trace-faults: their stack walk slows every read
    hist = vm.INIT.index("p:clock_read read_hpet")
    assert "hist:keys=stacktrace" in vm.INIT and 'if [ "$TRACE_FAULTS" = 1 ]' in vm.INIT[hist - 300:hist]
    topo = spec.topology(resolved)
    cmd = vm.qemu_command(topo, Path("vmlinuz"), Path("initrd"), "profile=2")
    assert cmd[-1].endswith("profile=2")

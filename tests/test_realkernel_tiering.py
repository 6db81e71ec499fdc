"""Real-kernel check of memory tiering without booting anything (issue 30): a CPU-less node
becomes a memory-only QEMU node (with an HMAT when the scenario has one), kernel.numa_balancing
2 and the tiering sysctls reach the guest, and the guest's tiers, demotion targets and page
placement are read back from its console. The boots themselves: docs/realkernel.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import numasim
from numasim.realkernel import compare, spec, tiering, vm
from numasim.realkernel.console import build_result, memory_tiers, node_list, parse_console
from numasim.realkernel.errors import RealKernelError
from numasim.realkernel.validate import scenario_dict
from numasim.scenario import to_toml

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "realkernel"
TIERED = FIXTURES / "tiering-promote-4k-6.12.console"  # a 6.12 boot, trace lines left out
PLAIN = FIXTURES / "remote-toucher-4k-6.12.console"


def resolved(name="tiering-promote-4k", kernel="6.12", overrides=None):
    return numasim.resolve(to_toml(scenario_dict(name, kernel, overrides)))


def qemu(r) -> str:
    topo = spec.guest_memory(spec.topology(r), r)
    return " ".join(vm.qemu_command(topo, Path("vmlinuz"), Path("initrd.img")))


# ---------------------------------------------------------------- kernel.numa_balancing and sysctls


@pytest.mark.parametrize("mode, expect", [(2, 2), (3, 3), (True, 1), (1, 1), (False, 0), (0, 0)])
def test_numa_balancing_mode_reaches_the_guest_as_its_bits(mode, expect):
    assert spec.kernel_settings(resolved(overrides=[("kernel.numa_balancing", mode)]))["numa_balancing"] == expect


def test_tiering_sysctls_are_written_in_tiering_mode_and_only_off_default_otherwise():
    s = spec.kernel_settings(resolved())
    assert s["tiering"] == {"promote_rate_limit_MBps": 65536, "hot_threshold_ms": 1000, "demotion_enabled": 1,
                            "watermark_scale_factor": 100}
    normal = spec.kernel_settings(resolved(overrides=[("kernel.numa_balancing", 1)]))
    assert normal["tiering"] == {"demotion_enabled": 1, "watermark_scale_factor": 100}
    assert spec.kernel_settings(numasim.resolve(to_toml(scenario_dict("remote-toucher-4k", "6.12"))))["tiering"] == {}
    cfg = vm.config_text(s, 100, 60.0)
    assert "NUMA_BALANCING=2\n" in cfg
    # every setting with the paths to try, the first one the guest kernel has
    assert ("/sys/kernel/debug/sched/numa_balancing/hot_threshold_ms,"
            "/proc/sys/kernel/numa_balancing_hot_threshold_ms=1000") in cfg
    assert "/sys/kernel/mm/numa/demotion_enabled=1" in cfg and "/proc/sys/vm/watermark_scale_factor=100" in cfg
    assert "for s in $TIERING" in vm.INIT and "put ${f:-${s%%,*}} ${s#*=}" in vm.INIT


def test_a_setting_the_guest_lacks_is_named_in_the_result():
    text = PLAIN.read_text().replace(
        "@nsw begin", "@nsw warn missing=/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps\n@nsw begin", 1)
    r = build_result(parse_console(text), resolved("remote-toucher-4k"), {"kind": "qemu"})
    assert r.raw["source"]["missing_settings"] == ["/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps"]


# ---------------------------------------------------------------- the QEMU machine


def test_cpu_less_node_without_hmat_is_a_memory_only_node():
    s = qemu(resolved(overrides=[("machine.hmat", False)]))
    assert "-smp 2,sockets=1,cores=2,threads=1" in s
    assert "-numa node,nodeid=1,memdev=m1 " in s and "initiator" not in s
    assert "-numa cpu,node-id=0,socket-id=0" in s and "node-id=1" not in s
    assert "hmat" not in s
    # room for the guest kernel; the init script hands the excess to the hugetlb pool
    assert "memory-backend-ram,id=m0,size=640M" in s and "memory-backend-ram,id=m1,size=608M" in s


def test_cpu_less_node_with_hmat_has_an_initiator_and_the_profiles_latency_and_bandwidth():
    s = qemu(resolved())
    assert "-machine hmat=on" in s
    assert "-numa node,nodeid=1,memdev=m1,initiator=0" in s and "nodeid=0,memdev=m0 " in s
    base = "hmat-lb,initiator=0,target={},hierarchy=memory,data-type="
    for target, lat, bw in ((0, 100, 204800), (1, 300, 51200)):  # [machine.cost] of the scenario
        assert f"{base.format(target)}access-latency,latency={lat} " in s
        assert f"{base.format(target)}access-bandwidth,bandwidth={bw}M " in s
    assert s.count("hmat-lb") == 4


def test_a_memory_only_nodes_initiator_is_its_nearest_cpu_node():
    r = resolved(overrides=[("machine.nodes", 3), ("machine.cpus_per_node", [2, 0, 2]),
                            ("machine.memory_gib_per_node", [0.5, 0.5, 0.5]),
                            ("machine.distances", [[10, 20, 30], [20, 10, 15], [30, 15, 10]]),
                            ("machine.cost.latency_ns", [[100.0, 300.0, 200.0], [300.0, 100.0, 300.0],
                                                         [200.0, 300.0, 100.0]]),
                            ("machine.cost.node_bandwidth_gibps", [200.0, 50.0, 200.0]),
                            ("machine.cost.stream_gibps", [[0.5] * 3] * 3),
                            ("machine.cost.page_store_gibps", [[3.85] * 3] * 3),
                            ("machine.cost.touch_gibps", [[15.6] * 3] * 3)])
    t = spec.topology(r)
    assert t["cpu_nodes"] == [0, 2] and t["initiator"] == {1: 2}
    s = qemu(r)
    assert "-smp 4,sockets=2" in s and "-numa cpu,node-id=2,socket-id=1" in s
    assert "-numa node,nodeid=1,memdev=m1,initiator=2" in s
    assert s.count("hmat-lb") == 2 * 2 * 3  # 2 initiators x 3 targets, latency and bandwidth


def test_a_kmem_node_is_refused_with_what_to_write_instead():
    r = resolved(overrides=[("machine.memory_type", ["dram", "kmem"])])
    with pytest.raises(RealKernelError, match="hmat = true") as e:
        spec.topology(r)
    assert e.value.loc == "machine.memory_type"


def test_normal_balancing_runs_keep_their_vm_as_it_was():
    r = numasim.resolve(to_toml(scenario_dict("remote-toucher-4k", "6.12")))
    t = spec.topology(r)
    assert spec.guest_memory(t, r) is t and "cpu_nodes" not in t
    assert spec.place_interval(r, 1000) == 0 and spec.place_interval(resolved(), 1000) == 1000


# ---------------------------------------------------------------- the guest's console


def test_tier_and_demotion_lines_become_the_simulators_memory_tiers():
    assert node_list("0-2,5") == [0, 1, 2, 5] and node_list("-") == [] and node_list("") == []
    p = parse_console("@nsw tier id=4 nodes=0,2\n@nsw tier id=22 nodes=1,3\n"
                      "@nsw demotion node=0 preferred=1 fallback=1,3\n@nsw demotion node=2 preferred=3 fallback=1,3\n"
                      "@nsw demotion node=1 preferred=- fallback=-\n")
    scenario = {"machine": {"topology": {"nr_nodes": 4, "node_cpus": [[0], [], [1], []]}}}
    t = memory_tiers(p, scenario)
    assert t["tier"] == [4, 22, 4, 22] and t["toptier"] == [True, False, True, False]
    assert t["demotion"] == [[1], [], [3], []] and t["demotion_fallback"][0] == [1, 3]
    assert tiering.tier_layout(t) == "top 0,2 | lower 1,3 | demote 0>1 2>3"
    assert memory_tiers(parse_console(""), scenario) is None  # before 6.1: no tiers in sysfs


def test_hot_set_is_the_middle_sigma_of_pmbenchs_set():
    w = {"kind": "pmbench", "pattern": "Normal", "set_mib": 256, "map_mib": 256, "shape": 8192.0}
    assert tiering.hot_buckets(w) == list(range(24, 40))
    assert tiering.hot_buckets({**w, "pattern": "uniform"}) == []
    # a process that has touched only its first pages has them all on its own node for a moment
    assert tiering.reached_at([(6.0, 1.0), (7.0, 0.5), (11.0, 0.92), (12.0, 0.95)], 0.9) == 11.0
    assert tiering.reached_at([(6.0, 1.0), (7.0, 0.5)], 0.9) is None


def test_tiered_console_gives_tiers_promotions_and_where_the_hot_set_was():
    r = build_result(parse_console(TIERED.read_text()), resolved(), {"kind": "qemu"})
    assert r.raw["memory_tiers"]["tier"] == [4, 54]  # 576 x 3 x 4 = 6912: memory_tier54, as simulated
    assert r.raw["memory_tiers"]["demotion"] == [[1], []]
    assert r.counters["pgpromote_success"] > 0 and r.counters["pgdemote_kswapd"] > 0
    assert "pgpromote_success" in r.vmstat.columns
    assert r.raw["source"]["guest_reserve"][0]["want_kb"] == 512 * 1024
    nf = r.raw["series"]["node_free"]
    assert set(nf["node"]) == {0, 1} and len(nf["time_s"]) == len(nf["kib"])
    pl = r.placement
    assert set(pl["node"]) == {0, 1} and pl["bucket"].max() == 63
    share = tiering.hot_share_series(r)
    assert share and all(0.0 <= x <= 1.0 for _, x in share)
    m = compare.metrics(r)
    assert m["memory_tiers"] == "top 0 | lower 1 | demote 0>1"
    sim = numasim.run(to_toml(scenario_dict("tiering-promote-4k", "6.12")))
    cmp = compare.compare(sim, r)
    checked = [x["metric"] for x in cmp["rows"] if x["checked"]]
    assert checked == ["pgpromote_success", "pgdemote_kswapd", "memory_tiers", "hot_fast_share_end"]
    rows = {x["metric"]: x for x in cmp["rows"]}
    assert rows["memory_tiers"]["ok"] and rows["memory_tiers"]["sim"] == rows["memory_tiers"]["vm"]


ZONEINFO = """Node 0, zone      DMA
  pages free     3840
  pagesets
    cpu: 0
              count: 10
    cpu: 1
              count: 2
Node 0, zone    DMA32
  pagesets
    cpu: 0
              count: 15000
Node 1, zone   Normal
  pagesets
    cpu: 0
              count: 7
"""


BUSYBOX = next((p for p in vm.BUSYBOX_PATHS if Path(p).exists()), None)


@pytest.mark.skipif(BUSYBOX is None, reason="busybox-static (system-packages.txt) is not installed")
def test_free_pages_on_the_per_cpu_lists_count_when_a_node_is_sized(tmp_path):
    """The init script sizes a tiering node by MemFree plus the pages on its per-CPU lists
    (/proc/zoneinfo's pageset counts, every zone of the node), which MemFree leaves out."""
    m = re.search(r"pcp_kb\(\) \{\n(.*?)\n\}", vm.INIT, re.S)
    assert m, "the init script's pcp_kb"
    prog = m.group(1).replace("/proc/zoneinfo", str(tmp_path / "zoneinfo"))
    (tmp_path / "zoneinfo").write_text(ZONEINFO)
    kb = [subprocess.run([BUSYBOX, "sh", "-c", f"set -- {n}\n{prog}"], capture_output=True, text=True, check=True).stdout.strip()
          for n in (0, 1)]
    assert kb == [str((10 + 2 + 15000) * 4), str(7 * 4)]
    assert "free=$(($(awk '/MemFree/ {print $4}' $d/meminfo) + pcp))" in vm.INIT


def test_the_runners_pcp_lines_join_the_node_free_series():
    text = "\n".join(["@nsw nodefree t=0.000 kb=1000,2000", "@nsw pcp t=0.000 kb=30,40",
                      "@nsw nodefree t=0.100 kb=900,2000", "@nsw pcp t=0.100 kb=20,40"])
    p = parse_console(text)
    assert p["pcp"] == {0.0: [30, 40], 0.1: [20, 40]} and p["skipped"] == 0
    r = build_result(parse_console(TIERED.read_text() + "\n" + text), resolved(), {"kind": "qemu"})
    nf = r.raw["series"]["node_free"]
    assert len(nf["pcp_kib"]) == len(nf["kib"])


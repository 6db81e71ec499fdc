"""`numasim calibrate` without booting: from `numaw calibrate`'s figures to machine-profile
constants (each from the mechanism it stands for), a profile that resolves, the console's
`cal` lines, `validate --calibrate` on a saved console, and the C micro-benchmarks on this
host (without the phase that switches kernel.numa_balancing)."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import numasim
from numasim.realkernel import calibrate as cal
from numasim.realkernel import vm
from numasim.realkernel.console import parse_console
from numasim.realkernel.validate import scenario_dict
from numasim.scenario import to_toml, tomllib

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "realkernel" / "remote-toucher-4k-6.12.console"

# one boot of 6.12 under TCG on a 2-core host (docs/realkernel.md, "Calibration")
FIGURES = {"zero_fault": 4038.9, "stream_0_0": 0.2836, "stream_0_1": 0.2954, "stream_1_0": 0.2701,
           "stream_1_1": 0.2607, "first_touch": 61220.2, "rep_stosb": 15397.2, "rep_movsq": 31191.4,
           "mprotect_pte": 420.1, "move_pages": 68812.1, "move_call": 393386.6, "hint_faults": 8229,
           "hint_pte_updates": 9271, "hint_store_ns": 3480.0, "hint_slow": 8229, "hint_slow_ns": 17210.0,
           "flush_ipi_0": 13509.3, "flush_ipi_1": 71452.6, "flush_ipi_2": 7371447.5, "spin_loss": 20732.1,
           "ipis_1": 2.0, "ipis_2": 4.0, "all_gibps": 0.418, "all_writers": 4, "all_cpu_share": 0.7,
           "clone": 234700.0, "wall_s": 29.2}


def page_ns(gibps):
    return 4096 / (gibps * (1 << 30) / 1e9)


def test_each_constant_follows_from_its_micro_benchmark():
    c, how, missing = cal.costs(FIGURES, 2)
    assert c["stream_gibps"] == [[0.2836, 0.2954], [0.2701, 0.2607]]
    # a zero-page read fault is entry + exit; the rest of a first touch beyond the store is
    # what do_anonymous_page does (the engine charges it as clear_page)
    assert c["fault_entry_exit_ns"] == 4038.9
    assert c["clear_page_ns"] == pytest.approx(61220.2 - page_ns(0.2836) - 4038.9, abs=0.1)
    copy_ns = 4096 / (c["page_copy_gibps"] * (1 << 30) / 1e9)
    assert copy_ns == pytest.approx(31191.4, rel=1e-3)  # rep movsq of a page = copy_page
    assert c["migrate_page_ns"] == pytest.approx(68812.1 - copy_ns, abs=1)
    assert c["pte_update_ns"] == 420.1
    # a store that took a hint fault, less the plain store and the fault's entry/exit: the
    # mean where numaw gives it (time adds up), else the median
    assert c["hint_fault_ns"] == pytest.approx(17210.0 - 3480.0 - 4038.9, abs=0.1)
    with_mean = cal.costs({**FIGURES, "hint_mean_ns": 25000.0}, 2)[0]
    assert with_mean["hint_fault_ns"] == pytest.approx(25000.0 - 3480.0 - 4038.9, abs=0.1)
    # per TLB IPI (2 per mprotect pair): round = send + handler; the spinner loses the handler
    assert c["ipi_receive_ns"] == pytest.approx(20732.1 / 2, abs=0.1)
    assert c["ipi_send_ns"] + c["ipi_receive_ns"] == pytest.approx((71452.6 - 13509.3) / 2, abs=0.2)
    assert c["ipi_per_target_ns"] == 0.0  # 1.47 host cores: a second spinner cannot be timed
    assert cal.host_cores(FIGURES) == pytest.approx(0.418 / 0.2836, abs=1e-3)
    # 4 writers charged 0.7 of their wall time: 2.8 CPU-s per s, of which 1.474 ran
    assert cal.steal_in_runtime(FIGURES) == pytest.approx((2.8 - 1.474) / (4 - 1.474), abs=1e-3)
    assert cal.steal_in_runtime({**FIGURES, "all_cpu_share": 0.3}) == 0.0  # at most what ran
    assert cal.steal_in_runtime({**FIGURES, "all_cpu_share": 1.0}) == 1.0
    # pthread_create on a fresh stack, the creator's time: the cost of each clone
    assert c["clone_ns"] == 234700.0
    assert set(c) <= set(cal.MEASURED) and all(k in how for k in c)
    assert "latency_ns" in missing and "hint_fault_ns" not in " ".join(missing)


def test_what_was_not_measured_keeps_the_scenarios_value():
    few = {**FIGURES, "hint_faults": 10, "hint_slow": 10, "ipis_1": 0.0}
    c, _, missing = cal.costs(few, 2)
    assert "hint_fault_ns" not in c and any(m.startswith("hint_fault_ns") for m in missing)
    assert not {"ipi_send_ns", "ipi_receive_ns"} & set(c) and "ipi_send_ns" in missing
    # a boot calibrated before `clone` was measured keeps the scenario's clone_ns
    assert "clone_ns" not in cal.costs({k: v for k, v in FIGURES.items() if k != "clone"}, 2)[0]
    d = cal.apply(scenario_dict("two-processes-4k", "6.12"), few)
    r = numasim.resolve(to_toml(d))
    assert r["machine"]["cost"]["hint_fault_ns"] == 20000.0  # the scenario's own
    assert r["machine"]["cost"]["fault_entry_exit_ns"] == 4038.9
    assert r["machine"]["host_cores"] == pytest.approx(1.474)
    assert r["machine"]["steal_in_runtime"] == pytest.approx(0.525, abs=1e-3)
    for bad in ({"steal_in_runtime": 1.5}, {"host_cores": None, "steal_in_runtime": 0.5}):
        m = {k: v for k, v in {**d["machine"], **bad}.items() if v is not None}
        with pytest.raises(numasim.ScenarioError, match="steal_in_runtime"):
            numasim.resolve(to_toml({**d, "machine": m}))
    with pytest.raises(Exception, match="stream_0_0"):
        cal.costs({"zero_fault": 1.0}, 2)


def test_the_written_profile_is_a_machine_the_engine_resolves():
    r = numasim.resolve(to_toml(scenario_dict("two-processes-4k", "6.12")))
    text = cal.profile_toml("qemu-tcg-test", r, FIGURES, {"kernel": "6.12.x", "qemu": "QEMU 7.2", "wall_s": 38})
    prof = tomllib.loads(text)
    assert prof["nodes"] == 2 and prof["cpus_per_node"] == 2 and prof["host_cores"] == pytest.approx(1.474)
    assert text.count("# measured") >= 8 and "# not measured" in text
    src = prof["source"]
    assert src["fault_entry_exit_ns"].startswith("measured:") and src["latency_ns"].startswith("assumed:")
    assert set(src) >= set(prof["cost"])
    machine = {k: v for k, v in prof.items() if k != "name"}
    d = {"seed": 1, "machine": machine, "kernel": {"version": "6.12"},
         "workload": [{"kind": "numa01", "threads": 2, "size_mib": 16, "passes": 1}]}
    res = numasim.run(to_toml(d))
    assert res.completed and res.counters["pgfault"] > 0


def test_console_cal_lines_are_kept_and_garbage_dropped():
    p = parse_console("@nsw cal zero_fault=4038.9 stream_0_0=0.28\n@nsw cal first_touch=nan x=abc\n"
                      "@nsw cal hint_faults=8229\n")
    assert p["calibration"] == {"zero_fault": 4038.9, "stream_0_0": 0.28, "hint_faults": 8229}
    assert all(math.isfinite(v) for v in p["calibration"].values())


def test_validate_calibrate_simulates_each_boot_with_its_own_costs(tmp_path):
    console = tmp_path / "boot.console"
    lines = [f"@nsw cal {k}={v}" for k, v in FIGURES.items()]
    console.write_text("\n".join(lines) + "\n" + FIXTURE.read_text())
    base = [sys.executable, "-m", "numasim", "validate", "remote-toucher-4k", "--kernel", "6.12", "-q", "--json",
            "--calibrate"]
    p = subprocess.run([*base, "--vm-result", str(console), "--out", str(tmp_path / "v")], capture_output=True, text=True)
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr, p.stderr
    boot = tomllib.loads((tmp_path / "v" / "remote-toucher-4k-6.12" / "scenario.toml").read_text())
    assert boot["machine"]["cost"]["fault_entry_exit_ns"] == 4038.9
    # a console without the measurements is refused with the reason
    p = subprocess.run([*base, "--vm-result", str(FIXTURE), "--out", str(tmp_path / "w")], capture_output=True, text=True)
    assert p.returncode != 0 and "no calibration" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([*base, "--vm-result", str(console), "--costs", "x.toml"], capture_output=True, text=True)
    assert p.returncode != 0 and "give one" in p.stderr


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc (system-packages.txt) is not installed")
def test_numaw_calibrate_measures_this_host():
    exe = vm.numaw_path()
    runs = []
    for _ in range(3):  # the least disturbed of three: the suite's other workers share the 2 cores
        p = subprocess.run([str(exe), "calibrate", "size_mib=4", "reps=1", "hint_s=0", "flush_iters=50"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        runs.append(parse_console(p.stdout)["calibration"])
    got = runs[0]
    for k in ("zero_fault", "first_touch", "stream_0_0", "rep_stosb", "rep_movsq", "mprotect_pte", "all_gibps",
              "all_first_touch"):
        assert got.get(k, 0) > 0, (k, got)
    # a write fault allocates and clears as well
    assert min(r["first_touch"] for r in runs) > min(r["zero_fault"] for r in runs), runs
    assert got["hint_skipped"] == 1  # hint_s=0 leaves kernel.numa_balancing alone
    bad = subprocess.run([str(exe), "calibrate", "hint_s=-1"], capture_output=True, text=True)
    assert bad.returncode != 0 and "bad parameters" in bad.stdout + bad.stderr


def test_a_tcg_guests_times_add_up_to_the_runtime_the_host_shares_out():
    # 4 busy threads on 4 vCPUs that share 1.5 host cores: each thread's runtime is the whole
    # run, as in the guest (no steal clock); getrusage shares it out as cputime_adjust does
    base = {"seed": 1, "machine": {"nodes": 2, "cpus_per_node": 2, "smt": 1, "memory_gib_per_node": 1,
                                   "distances": [[10, 20], [20, 10]], "profile": "xeon-platinum-2n-128c"},
            "kernel": {"version": "6.12"},
            "workload": [{"kind": "numa01", "threads": 4, "size_mib": 64, "passes": 20}]}
    d = {**base, "machine": {**base["machine"], "host_cores": 1.5}}
    vm_run, bare = numasim.run(to_toml(d)), numasim.run(to_toml(base))
    busy = 4 * vm_run.elapsed_s
    assert vm_run.times["user_s"] + vm_run.times["system_s"] == pytest.approx(busy, rel=0.05)
    assert vm_run.elapsed_s > 2 * bare.elapsed_s  # 1.5 cores for 4 busy vCPUs
    # on bare metal nothing is scaled: the engine's own user and system time
    assert bare.times["user_s"] + bare.times["system_s"] <= 4 * bare.elapsed_s * 1.001
    # a guest whose clock stops while the host runs others (steal_in_runtime 0): the same run,
    # charged only the time its vCPU ran, split in the same proportion
    held = numasim.run(to_toml({**d, "machine": {**d["machine"], "steal_in_runtime": 0.0}}))
    assert held.elapsed_s == vm_run.elapsed_s and held.counters == vm_run.counters
    assert held.times["user_s"] + held.times["system_s"] < 0.5 * busy
    share = lambda r: r.times["system_s"] / (r.times["user_s"] + r.times["system_s"])  # noqa: E731
    assert share(held) == pytest.approx(share(vm_run), rel=0.05)  # each thread scaled by its own steal


@pytest.mark.parametrize("name", numasim.machine_profiles())
def test_every_profile_constant_says_where_it_comes_from(name):
    prof = tomllib.loads(numasim.machine_profile_toml(name))
    src = prof["source"]
    for key in [*prof["cost"], "nodes", "cpus_per_node", "smt", "memory_gib_per_node", "distances"]:
        kind = src[key].split(":", 1)[0]
        assert kind in ("spec", "measured", "derived", "assumed"), (key, src[key])
        if kind == "derived":  # fitted to an experiment's own runs: which one, so it counts in-sample
            assert src[key].split(":", 1)[1].split()[0] in ("mthp-numa", "vma-flags-grouping", "delay-mapping",
                                                            "migrate-batch", "kvm-pinned", "autonuma-balancing")


@pytest.mark.parametrize("source, message", [
    ({"pte_update_ns": "guess: 5 ns"}, "KIND: citation"),
    ({"pte_update": "spec: x"}, "not a machine or"),
])
def test_bad_provenance_is_refused(source, message):
    d = {"seed": 1, "machine": {"profile": "intel-4s-48c", "source": source},
         "workload": [{"kind": "numa02", "threads": 2, "size_mib": 8, "passes": 1}]}
    with pytest.raises(numasim.ScenarioError, match=message):
        numasim.resolve(to_toml(d))


def test_machines_show_summarises_the_provenance():
    p = subprocess.run([sys.executable, "-m", "numasim", "machines", "--show", "xeon-icx-2n-128c"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "[source]" in p.stdout and "# provenance: " in p.stdout
    assert "#   derived stream_gibps: mthp-numa" in p.stdout


def test_clear_page_comes_from_the_first_touches_under_load_where_measured():
    # 4 vCPUs first-touching at once on 1.474 host cores: each ran 0.368 of the wall time
    figures = {**FIGURES, "all_first_touch": 90000.0}
    c, how, _ = cal.costs(figures, 2)
    share = cal.host_cores(FIGURES) / 4
    assert c["clear_page_ns"] == pytest.approx(90000.0 * share - page_ns(0.2836) - 4038.9, abs=0.2)
    assert "4 first touches at once" in how["clear_page_ns"]
    # without it (older numaw), the lone thread's first touch
    assert cal.costs(FIGURES, 2)[0]["clear_page_ns"] == pytest.approx(61220.2 - page_ns(0.2836) - 4038.9, abs=0.1)


def test_the_ticks_own_kernel_work_is_reported_as_system_time():
    # numaw calibrate's spinners, one per CPU with NUMA balancing off, do no kernel work of
    # their own: the system share of their CPU time is their CPU's tick and softirqs
    # (spin_sys_share); boots without it keep 0
    assert cal.tick_sys_share({**FIGURES, "spin_sys_share": 0.0513}) == 0.0513
    assert cal.tick_sys_share(FIGURES) is None
    d = cal.apply(scenario_dict("overloaded-node-4k", "6.12"), {**FIGURES, "spin_sys_share": 0.05})
    assert numasim.resolve(to_toml(d))["machine"]["tick_sys_share"] == 0.05
    plain = cal.apply(scenario_dict("overloaded-node-4k", "6.12"), FIGURES)
    a, b = numasim.run(to_toml(plain)), numasim.run(to_toml(d))
    # the same run (the share is inside the measured costs), its user time's share reported
    # as system: system grows by 5% of the user time, the sum stays
    assert a.counters == b.counters and a.elapsed_s == b.elapsed_s
    assert b.times["system_s"] == pytest.approx(a.times["system_s"] + 0.05 * a.times["user_s"], rel=1e-6)
    assert b.times["user_s"] + b.times["system_s"] == pytest.approx(a.times["user_s"] + a.times["system_s"], rel=1e-9)
    for bad in (1.0, -0.1):
        with pytest.raises(numasim.ScenarioError, match="tick_sys_share"):
            numasim.resolve(to_toml({**d, "machine": {**d["machine"], "tick_sys_share": bad}}))


def test_loop_rates_and_clock_reads_come_from_their_own_loops():
    # each numaw loop at its own rate: a whole-buffer memset (stream), a memset per page
    # (page_store: a program's store op) and one load per cache line (touch: remote_toucher.c)
    loops = {f"{what}_{i}_{j}": v for what, v in (("page_store", 3.8), ("touch", 15.8)) for i in (0, 1) for j in (0, 1)}
    clock = {"clock_ns": 1400.0, "clock_sys_share": 0.9, "clock_busy_1_ns": 1800.0, "clock_busy_2_ns": 2400.0,
             "clock_loop_0_ns": 3800.0, "clock_loop_0_sys_ns": 5200.0, "clock_loop_1_ns": -4000.0,
             "clock_loop_1_sys_ns": 3800.0, "clock_loop_2_ns": -50.0, "clock_loop_2_sys_ns": -10.0}
    c, how, missing = cal.costs({**FIGURES, **loops, **clock}, 2)
    assert c["page_store_gibps"] == [[3.8, 3.8], [3.8, 3.8]] and c["touch_gibps"] == [[15.8, 15.8], [15.8, 15.8]]
    assert c["stream_gibps"] == [[0.2836, 0.2954], [0.2701, 0.2607]]
    # one figure per number of other busy CPUs: the read's time from the loop of reads alone and
    # beside spinners, its system time from the toucher loops (a noisy negative one clamped)
    assert c["clock_read_ns"] == [1400.0, 1800.0, 2400.0] and c["clock_read_sys_ns"] == [5200.0, 3800.0, 0.0]
    # a boot before the loop measurement keeps the scenario's (its idle clock_gettime alone is
    # charged far less system time per read than a workload's loop)
    old = cal.costs({**FIGURES, "clock_ns": 1450.0, "clock_sys_share": 0.9}, 2)[0]
    assert "clock_read_ns" not in old and "clock_read_sys_ns" not in old
    c2, _, missing2 = cal.costs(FIGURES, 2)
    assert {"touch_gibps", "page_store_gibps", "clock_read_ns", "clock_read_sys_ns"} <= set(missing2)
    assert not {"touch_gibps", "clock_read_ns"} & set(c2)
    d = cal.apply(scenario_dict("shared-processes-4k", "6.12"), {**FIGURES, **loops, **clock})
    r = numasim.resolve(to_toml(d))["machine"]["cost"]
    assert r["touch_gibps"] == [[15.8, 15.8], [15.8, 15.8]] and r["clock_read_sys_ns"] == [5200.0, 3800.0, 0.0]


@pytest.mark.parametrize("name", ["shared-processes-4k", "overloaded-node-4k", "two-processes-4k"])
def test_validation_loop_and_clock_costs_are_the_shipped_calibrations_medians(name):
    # the figures the validation scenarios cite come from the calibration boots shipped beside
    # them (validation/calibrations/): a changed scenario or file without the other fails here
    import json
    import statistics

    data = json.loads((REPO / "python" / "numasim" / "validation" / "calibrations" / "2026-11-28.json").read_text())
    figs = [b["calibration"] for b in data["boots"]]
    assert len(figs) == 4 and {b["kernel_choice"] for b in data["boots"]} == {"6.1", "6.12"}
    med = lambda key: statistics.median(f[key] for f in figs)  # noqa: E731
    pairs = lambda what: statistics.median(f[f"{what}_{i}_{j}"] for f in figs for i in (0, 1) for j in (0, 1))  # noqa: E731
    cost = numasim.resolve(to_toml(scenario_dict(name, "6.12")))["machine"]["cost"]
    assert cost["touch_gibps"][0][1] == pytest.approx(pairs("touch"), abs=0.05)
    assert cost["page_store_gibps"][1][0] == pytest.approx(pairs("page_store"), abs=0.05)
    busy = [med("clock_ns")] + [med(f"clock_busy_{k}_ns") for k in (1, 2, 3)]
    assert cost["clock_read_ns"] == pytest.approx(busy, abs=1.0)
    assert cost["clock_read_sys_ns"] == pytest.approx([med(f"clock_loop_{k}_sys_ns") for k in range(4)], abs=1.0)

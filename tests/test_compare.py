"""mmtests' report formulas (numasim.compare) against the figures printed in the seed
changelogs (seed 003, Mel Gorman 2015), and `numasim compare` on saved results."""

import json
import math
import re

import pytest

from conftest import SMALL_SETS, numasim_cli
from fake_results import fake_result
from numasim.compare import (
    HIGHER,
    HPAGE_PMD_NR,
    LOWER,
    Column,
    autonuma_cost,
    best,
    compare,
    hmean,
    pdiff,
    pndiff,
    significant,
    stat_rows,
    stddev,
    vmstat_rows,
)

# ---------------------------------------------------------------- seed 003: autonumabench

COLS = ["3.19.0", "4.0-rc4", "vmwrite", "preserve", "slowscan"]

# "Time System/Elapsed-<TEST>": five values, then the four printed percentages (B..E vs A)
TIMES = {
    "System-NUMA01": ([124.00, 161.86, 107.13, 103.13, 145.01], [-30.53, 13.60, 16.83, -16.94]),
    "System-NUMA01_THEADLOCAL": ([115.54, 107.64, 131.87, 83.30, 92.35], [6.84, -14.13, 27.90, 20.07]),
    "System-NUMA02": ([9.35, 10.44, 8.95, 10.72, 8.16], [-11.66, 4.28, -14.65, 12.73]),
    "System-NUMA02_SMT": ([3.87, 4.63, 4.57, 3.99, 3.36], [-19.64, -18.09, -3.10, 13.18]),
    "Elapsed-NUMA01": ([570.06, 567.82, 515.78, 517.26, 543.80], [0.39, 9.52, 9.26, 4.61]),
    "Elapsed-NUMA01_THEADLOCAL": ([393.69, 384.83, 384.10, 384.31, 380.73], [2.25, 2.44, 2.38, 3.29]),
    "Elapsed-NUMA02": ([49.09, 49.33, 48.86, 48.78, 50.94], [-0.49, 0.47, 0.63, -3.77]),
    "Elapsed-NUMA02_SMT": ([47.51, 47.15, 47.98, 48.12, 49.56], [0.76, -0.99, -1.28, -4.31]),
}

# the vmstat block of the autonumabench run (2014-2019 names)
VMSTAT_2015 = {
    "NUMA base PTE updates": [245706197, 240041607, 238195516, 244704842, 115012800],
    "NUMA huge PMD updates": [479530, 468448, 464868, 477573, 224487],
    "NUMA page range updates": [491225557, 479886983, 476207932, 489222218, 229950144],
    "NUMA hint faults": [659753, 656503, 641678, 656926, 294842],
    "NUMA hint local faults": [381604, 373963, 360478, 337585, 186249],
    "NUMA hint local percent": [57, 56, 56, 51, 63],
    "NUMA pages migrated": [5412140, 6374899, 6266530, 5277468, 5755096],
    "AutoNUMA cost": [5121, 5083, 4994, 5097, 2388],
}


def test_pndiff_reproduces_every_printed_time_percentage():
    """Times are lower-is-better: 100 - new*100/base, positive = less time.
    32 cells, each within the rounding of the printed two-decimal values."""
    n = 0
    for row, (values, printed) in TIMES.items():
        base = values[0]
        assert pndiff(base, base) == 0.0  # the baseline column prints 0.00%
        for new, pct in zip(values[1:], printed):
            assert abs(pndiff(new, base) - pct) < 0.006, (row, new, pct)
            # the other rule would get the sign wrong
            assert abs(pdiff(new, base) - pct) > 0.1 or abs(pct) < 0.05
            n += 1
    assert n == 32
    assert f"{pndiff(161.86, 124.00):.2f}" == "-30.53"  # workloads.md's worked example


def counters_2015(i):
    v = {k: vals[i] for k, vals in VMSTAT_2015.items()}
    return {
        "numa_pte_updates": v["NUMA base PTE updates"],
        "numa_huge_pte_updates": v["NUMA huge PMD updates"],
        "numa_hint_faults": v["NUMA hint faults"],
        "numa_hint_faults_local": v["NUMA hint local faults"],
        "numa_pages_migrated": v["NUMA pages migrated"],
    }


@pytest.mark.parametrize("i", range(5), ids=COLS)
def test_vmstat_rows_reproduce_the_2015_autonuma_cost_and_local_percent(i):
    rows = {label: value for label, value, _ in vmstat_rows(counters_2015(i))}
    # AutoNUMA cost: 7*pte + 5000*hint + 19*migrated, /1e6, printed with %d (truncated);
    # the page-copy term (519 per migrated page) is not added (mmtests' stray semicolon)
    assert int(rows["AutoNUMA cost"]) == VMSTAT_2015["AutoNUMA cost"][i]
    c = counters_2015(i)
    with_copy = rows["AutoNUMA cost"] + 519 * c["numa_pages_migrated"] / 1e6
    assert int(with_copy) != VMSTAT_2015["AutoNUMA cost"][i]
    # hint local percent: 100*local/faults, the old format printed it with %d
    assert int(rows["NUMA hint local percent"]) == VMSTAT_2015["NUMA hint local percent"][i]
    # the raw counter is "base-page range updates" (was "NUMA base PTE updates")
    assert rows["NUMA base-page range updates"] == VMSTAT_2015["NUMA base PTE updates"][i]
    assert rows["NUMA PMD updates"] == VMSTAT_2015["NUMA huge PMD updates"][i]
    # base PTEs only: raw - 512 per PMD; the old "page range updates" added 512 per PMD instead
    pte, huge = c["numa_pte_updates"], c["numa_huge_pte_updates"]
    assert rows["NUMA PTE updates"] == pte - HPAGE_PMD_NR * huge
    assert pte + HPAGE_PMD_NR * huge == VMSTAT_2015["NUMA page range updates"][i]


def test_autonuma_cost_other_published_figures():
    # workloads.md §2.6: the 2014 RFC (3.18-rc4) and the 6.2 report (2023)
    assert int(autonuma_cost(556489407, 1538964, 7329212)) == 11729
    assert f"{autonuma_cost(152259275, 154660352, 8179067):.2f}" == "774522.98"


def test_hint_local_percent_is_100_without_hint_faults():
    rows = {label: value for label, value, _ in vmstat_rows({"numa_hint_faults": 0})}
    assert rows["NUMA hint local percent"] == 100.0
    assert rows["AutoNUMA cost"] == 0.0


# ---------------------------------------------------------------- seed 003: xfsrepair, 3 iterations

# metric -> per column (Min, Amean, Stddev, CoeffVar, Max), and the printed percentages of
# columns B..E as (Min, Amean, Stddev, CoeffVar, Max)
XFS = {
    "real-fsmark": ([(1183.29, 1188.30, 4.12, 0.35, 1193.39), (1165.73, 1177.34, 10.82, 0.92, 1191.77),
                     (1152.78, 1157.97, 4.14, 0.36, 1162.90), (1153.64, 1158.21, 5.98, 0.52, 1166.66),
                     (1177.62, 1182.22, 4.60, 0.39, 1188.50)],
                    [(1.48, 0.92, -162.29, -164.73, 0.14), (2.58, 2.55, -0.28, -2.91, 2.55),
                     (2.51, 2.53, -45.05, -48.82, 2.24), (0.48, 0.51, -11.53, -12.10, 0.41)]),
    "syst-fsmark": ([(4107.85, 4111.37, 2.63, 0.06, 4114.18), (4027.75, 4055.70, 20.32, 0.50, 4075.45),
                     (3986.74, 3987.19, 0.37, 0.01, 3987.65), (3979.16, 3998.72, 16.47, 0.41, 4019.45),
                     (4048.76, 4061.69, 15.05, 0.37, 4082.80)],
                    [(1.95, 1.35, -671.82, -682.41, 0.94), (2.95, 3.02, 85.89, 85.45, 3.08),
                     (3.13, 2.74, -525.59, -543.22, 2.30), (1.44, 1.21, -471.79, -478.78, 0.76)]),
    "real-xfsrepair": ([(441.51, 450.88, 6.87, 1.52, 457.80), (463.96, 468.32, 4.55, 0.97, 474.60),
                        (449.50, 454.14, 3.46, 0.76, 457.82), (440.08, 442.36, 1.78, 0.40, 444.42),
                        (439.87, 440.59, 0.52, 0.12, 441.03)],
                       [(-5.08, -3.87, 33.75, 36.21, -3.67), (-1.81, -0.72, 49.58, 49.94, -0.00),
                        (0.32, 1.89, 74.12, 73.62, 2.92), (0.37, 2.28, 92.50, 92.33, 3.66)]),
    "syst-xfsrepair": ([(195.76, 199.66, 3.02, 1.51, 203.11), (278.47, 290.60, 10.30, 3.54, 303.65),
                        (262.34, 277.20, 13.17, 4.75, 294.35), (203.70, 204.68, 0.71, 0.34, 205.33),
                        (143.64, 150.55, 5.00, 3.32, 155.28)],
                       [(-42.25, -45.55, -241.37, -134.54, -49.50), (-34.01, -38.84, -336.37, -214.31, -44.92),
                        (-4.06, -2.51, 76.63, 77.20, -1.09), (26.62, 24.60, -65.61, -119.63, 23.55)]),
}


def samples_of(stats):
    """Three iterations: Min and Max are two samples, the mean gives the third."""
    mn, am, _, _, mx = stats
    return [mn, 3 * am - mn - mx, mx]


@pytest.mark.parametrize("metric", list(XFS))
def test_summary_rows_reproduce_the_xfsrepair_table(metric):
    """stat_rows on the three reconstructed samples of each column gives the printed Min,
    Amean, Stddev, CoeffVar and Max and their percentages. The 2015 Stddev divides by n
    (ddof=0); Stddev and CoeffVar use 100 - new*100/base even though they are not times."""
    printed, pcts = XFS[metric]
    per_col = [samples_of(s) for s in printed]
    rows = {r.stat: r for r in stat_rows(metric, LOWER, per_col, ddof=0)}
    assert list(rows) == ["Min", "Amean", "Stddev", "CoeffVar", "Max", "BAmean-50", "BAmean-95", "BAmean-99"]
    for k, stat in enumerate(["Min", "Amean", "Stddev", "CoeffVar", "Max"]):
        tol = 0.006 if stat in ("Min", "Max", "Amean") else 0.015  # reconstruction adds rounding
        for col, want in enumerate(printed):
            assert abs(rows[stat].cells[col].value - want[k]) < tol, (metric, stat, col)
        assert rows[stat].cells[0].pct == 0.0
        for col, want in enumerate(pcts, start=1):
            tol = 0.01 if stat in ("Min", "Max", "Amean") else 0.1
            assert abs(rows[stat].cells[col].pct - want[k]) < tol, (metric, stat, col, rows[stat].cells[col].pct)
    # the 2015 Stddev is the population one: the sample one (current mmtests) is sqrt(3/2) larger
    s1 = stddev(per_col[0], ddof=1)
    assert abs(s1 - printed[0][2] * math.sqrt(1.5)) < 0.03 and abs(s1 - printed[0][2]) > 0.1


def test_best_means_counts():
    xs = [7.0, 1.0, 6.0, 2.0, 5.0, 3.0, 4.0]
    # workloads.md §2.4: with 7 samples, BAmean-50 = best 3, -95 = best 6, -99 = best 6
    assert best(xs, 50) == [1.0, 2.0, 3.0]
    assert best(xs, 95) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] == best(xs, 99)
    assert best(xs, 50, HIGHER) == [7.0, 6.0, 5.0]
    assert best([3.0], 50) == [3.0]  # at least one
    rows = {r.stat: r for r in stat_rows("elsp-X", LOWER, [xs], ddof=1)}
    assert rows["BAmean-50"].cells[0].value == 2.0 and rows["BAmean-95"].cells[0].value == 3.5


def test_higher_is_better_uses_hmean_and_pdiff():
    base, new = [100.0, 200.0], [150.0, 300.0]
    rows = {r.stat: r for r in stat_rows("tput-pmbench", HIGHER, [base, new], ddof=1)}
    assert "Hmean" in rows and "Amean" not in rows and "BHmean-50" in rows
    assert rows["Hmean"].cells[0].value == pytest.approx(hmean(base)) == pytest.approx(400 / 3)
    assert rows["Hmean"].cells[1].pct == pytest.approx(50.0)  # new*100/base - 100
    assert rows["Max"].cells[1].pct == pytest.approx(50.0)
    assert rows["BHmean-50"].cells[1].value == 300.0  # the best is the highest
    # Stddev stays lower-is-better: a larger spread is a negative percentage
    assert rows["Stddev"].cells[1].pct == pytest.approx(-50.0)


def test_percentage_edge_cases_follow_stat_pm():
    assert pdiff(0, 5) == 0 and pdiff(5, 0) == 100 and pdiff(3, 3) == 0
    assert pndiff(0, 5) == 100 and pndiff(5, 0) == -99 and pndiff(3, 3) == 0


def test_significance_marks_only_means_beyond_both_intervals():
    base = [10.0, 10.1, 9.9]  # stddev 0.1: half-width 0.196
    far, near = [12.0, 12.1, 11.9], [10.2, 10.3, 10.1]  # differ by 2.0 and by 0.2 (< 0.392)
    assert significant(far, base) and not significant(near, base)
    assert not significant(far, [10.0])  # one sample: no interval, no asterisks
    rows = {r.stat: r for r in stat_rows("elsp-X", LOWER, [base, far, near], ddof=1)}
    assert [c.sig for c in rows["Amean"].cells] == [False, True, False]
    assert not any(c.sig for r in rows.values() if r.stat != "Amean" for c in r.cells)
    text = compare([Column("base", [fake_result(elapsed_s=x) for x in base]),
                    Column("far", [fake_result(elapsed_s=x) for x in far]),
                    Column("near", [fake_result(elapsed_s=x) for x in near])]).to_text()
    amean = next(l for l in text.splitlines() if l.startswith("Amean") and "elsp-NUMA02" in l)
    assert "*-20.00%*" in amean and "( -2.00%)" in amean and "(  0.00%)" in amean


# ---------------------------------------------------------------- the whole comparison


def test_compare_layout_durations_and_summed_vmstat():
    c = {"numa_pte_updates": 1000, "numa_hint_faults": 100, "numa_hint_faults_local": 25,
         "numa_pages_migrated": 10}
    off = Column("off", [fake_result(system_s=1.0, elapsed_s=20.0, balancing=False)] * 2)
    on = Column("on", [fake_result(system_s=2.0, elapsed_s=10.0, counters=c),
                       fake_result(system_s=4.0, elapsed_s=14.0, counters=c)])
    cmp = compare([off, on], baseline="on")
    assert [col.name for col in cmp.columns] == ["on", "off"]  # the baseline comes first
    bench, dur, vm = cmp.sections
    assert bench.title == "autonumabench: NUMA02"
    assert [(r.stat, r.label) for r in bench.rows[:4]] == [
        ("Min", "syst-NUMA02"), ("Min", "elsp-NUMA02"), ("Amean", "syst-NUMA02"), ("Amean", "elsp-NUMA02")]
    amean = {r.label: r for r in bench.rows if r.stat == "Amean"}
    assert amean["elsp-NUMA02"].cells[0].value == 12.0
    assert amean["elsp-NUMA02"].cells[1].pct == pytest.approx(100 - 20 * 100 / 12)
    # Duration: totals over every run of the column
    d = {r.label: [x.value for x in r.cells] for r in dur.rows}
    assert d["Duration Elapsed"] == [24.0, 40.0] and d["Duration System"] == [6.0, 2.0]
    # vmstat: summed over the column's runs, then mmtests' formulas
    v = {r.label: [x.value for x in r.cells] for r in vm.rows}
    assert v["NUMA hint faults"] == [200, 0]
    assert v["NUMA hint local percent"] == [25.0, 100.0]
    assert v["AutoNUMA cost"][0] == pytest.approx((7 * 2000 + 5000 * 200 + 19 * 20) / 1e6)
    d = cmp.to_dict()
    assert d["baseline"] == "on" and d["sections"][0]["rows"][0]["cells"][1]["pct"] == pytest.approx(50.0)
    with pytest.raises(ValueError, match="baseline"):
        compare([off, on], baseline="nope")


def test_cli_compare_two_saved_results(tmp_path):
    """`numasim compare` on two saved (small numa02) results: every Amean/Min/Max
    percentage is 100 - new*100/base of the saved times, AutoNUMA cost follows the formula."""
    paths = {}
    for bal in ("off", "on"):
        p = tmp_path / f"{bal}.json"
        r = numasim_cli("run", "--workload", "numa02", "--balancing", bal, *SMALL_SETS, "--save", p)
        assert r.returncode == 0, r.stderr
        paths[bal] = p
    proc = numasim_cli("compare", paths["off"], paths["on"])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    lines = out.splitlines()
    assert lines[0] == "autonumabench: NUMA02"
    assert lines[1].split() == ["off", "on"]  # column names default to the file stems
    saved = {k: json.loads(p.read_text()) for k, p in paths.items()}
    for metric, key in (("syst-NUMA02", "system_s"), ("elsp-NUMA02", "elapsed_s")):
        base, new = saved["off"]["times"][key], saved["on"]["times"][key]
        want = f"{100 - new * 100 / base:6.2f}%"
        for stat in ("Min", "Amean", "Max", "BAmean-50"):
            line = next(l for l in lines if l.split()[:2] == [stat, metric])
            assert f"{base:.2f}" in line and f"{new:.2f}" in line and want in line, (line, want)
    c = saved["on"]["counters"]
    cost = (7 * c["numa_pte_updates"] + 5000 * c["numa_hint_faults"] + 19 * c["numa_pages_migrated"]) / 1e6
    assert c["numa_hint_faults"] > 0
    cost_line = next(l for l in lines if l.startswith("AutoNUMA cost"))
    assert cost_line.split()[-2:] == ["0.00", f"{cost:.2f}"]
    for label in ("Duration Elapsed", "NUMA base-page range updates", "NUMA PTE updates", "NUMA PMD updates",
                  "NUMA hint local percent", "Page migrate success", "Page migrate failure"):
        assert re.search(rf"^{label}\s", out, re.M), label
    # --json carries the same numbers; --baseline reorders
    proc = numasim_cli("compare", paths["off"], paths["on"], "--baseline", "on", "--json")
    d = json.loads(proc.stdout)
    assert d["baseline"] == "on" and [c["name"] for c in d["columns"]] == ["on", "off"]


def test_cli_compare_errors(tmp_path):
    (tmp_path / "x.json").write_text("{}")
    p = numasim_cli("compare", tmp_path / "x.json")
    assert p.returncode == 2 and "not a numasim result" in p.stderr
    p = numasim_cli("compare", tmp_path / "missing.json")
    assert p.returncode == 2 and "no such file" in p.stderr
    p = numasim_cli("compare", tmp_path)
    assert p.returncode == 2 and "no numasim result" in p.stderr


def test_equal_samples_have_zero_stddev():
    """Three equal elapsed times (a deterministic run repeated): the float mean of 195.652 x 3
    differs from 195.652 in the last bit, which made a Stddev of ~3e-14 and a percentage of
    -1.5e16 beside a real one."""
    x = 195.652
    assert stddev([x, x, x]) == 0.0 and stddev([x, x, x], ddof=0) == 0.0
    assert pndiff(5.38, stddev([x, x, x])) == -99.0

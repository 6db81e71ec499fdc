"""compare's tables: a header naming the workloads, columns aligned at any width, no NaN for a
single run, mismatched columns refused or flagged; the HTML report's colours and scenario
differences (issue 29, item 14)."""

import pytest

from conftest import numasim_cli
from fake_results import fake_result
from numasim.compare import Column, _fmt_pct, _fmt_value, compare
from numasim.report import build_html, scenario_differences


def test_the_header_names_the_workloads_compared():
    cols = [Column("a", [fake_result("numa01"), fake_result("numa02")]),
            Column("b", [fake_result("numa01"), fake_result("numa02")])]
    assert compare(cols).sections[0].title == "autonumabench: NUMA01, NUMA02"
    pm = [Column("a", [fake_result("pmbench")]), Column("b", [fake_result("pmbench")])]
    assert compare(pm).sections[0].title == "pmbench"
    assert compare(pm).to_text().startswith("pmbench\n")


def _value_ends(section, text: str) -> list:
    """For each row of ``section`` in ``text``: where each column's value ends."""
    lines = text.splitlines()
    start = lines.index(section.title) + 2
    ends = []
    for row, line in zip(section.rows, lines[start:start + len(section.rows)]):
        pos, mine = len(row.stat) + len(row.label), []
        for c in row.cells:
            v = _fmt_value(c.value, row.kind)
            pos = line.index(v, pos) + len(v)
            mine.append(pos)
            if section.percentages and _fmt_pct(c):
                pos = line.index(_fmt_pct(c), pos) + len(_fmt_pct(c))
        ends.append(mine)
    return ends


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e6, 1e12])
def test_values_stay_aligned_at_any_magnitude(scale):
    cols = [Column("base", [fake_result(system_s=1.0, elapsed_s=10.0, throughput=1e6)] * 2),
            Column("a-much-longer-column-name", [fake_result(system_s=scale, elapsed_s=10.0 * scale, throughput=3.0),
                                                 fake_result(system_s=2 * scale, elapsed_s=30.0 * scale, throughput=5.0)]),
            Column("c", [fake_result(system_s=0.5, elapsed_s=99999.0, throughput=1e12)] * 2)]
    cmp = compare(cols)
    text = cmp.to_text()
    for s in cmp.sections:
        ends = _value_ends(s, text)
        assert all(e == ends[0] for e in ends), (s.title, ends)
    # each column is as wide as its own numbers: the baseline's small ones stay close to the
    # labels whatever another column holds
    bench = cmp.sections[0]
    lead = max(len(r.stat) for r in bench.rows) + 1 + max(len(r.label) for r in bench.rows)
    assert _value_ends(bench, text)[0][0] - lead <= len("1000000.00") + 1


def test_a_single_run_column_shows_no_nan():
    cmp = compare([Column("one", [fake_result()]), Column("other", [fake_result(elapsed_s=12.0)])])
    text = cmp.to_text()
    assert "NaN" not in text and "nan" not in text
    stddev = [r for r in cmp.sections[0].rows if r.stat in ("Stddev", "CoeffVar")]
    assert stddev and all(c.value is None for r in stddev for c in r.cells)
    assert "NaN" not in cmp.to_html()


def test_columns_with_different_tests_or_run_counts_are_refused_or_flagged():
    a = Column("a", [fake_result("numa01"), fake_result("numa02")])
    b = Column("b", [fake_result("numa01")])
    with pytest.raises(ValueError, match="NUMA02 runs: a 1, b 0"):
        compare([a, b])
    c = Column("c", [fake_result("numa01"), fake_result("numa01", seed=2), fake_result("numa02")])
    with pytest.raises(ValueError, match="NUMA01 runs: a 1, c 2"):
        compare([a, c])
    flagged = compare([a, b], allow_mismatch=True)
    assert flagged.to_text().startswith("MISMATCHED columns")
    assert flagged.to_dict()["mismatch"] and "MISMATCHED" in flagged.to_html()
    assert not compare([a, Column("d", [fake_result("numa02"), fake_result("numa01")])]).mismatch


def test_the_command_line_refuses_a_mismatch_unless_allowed(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    fake_result("numa01").save(a / "r1.json")
    fake_result("numa02").save(a / "r2.json")
    fake_result("numa01").save(b / "r1.json")
    p = numasim_cli("compare", a, b)
    assert p.returncode == 2 and "--allow-mismatch" in p.stderr
    ok = numasim_cli("compare", a, b, "--allow-mismatch")
    assert ok.returncode == 0 and ok.stdout.startswith("MISMATCHED")


def test_the_report_colours_improvements_and_regressions_apart():
    base = Column("base", [fake_result(system_s=2.0, elapsed_s=10.0)] * 2)
    new = Column("new", [fake_result(system_s=4.0, elapsed_s=5.0)] * 2)  # syst worse, elsp better
    page = build_html([base, new])
    assert "td.better { color: #060; } td.worse { color: #b00; }" in page
    rows = {line.split("<th>")[2].split("</th>")[0]: line for line in page.splitlines()
            if line.startswith("<tr><th>Amean</th>")}
    assert 'class="pct worse sig"' in rows["syst-NUMA02"] and 'class="pct better sig"' in rows["elsp-NUMA02"]


def _resolved_like(balancing: bool, passes: int):
    r = fake_result(balancing=balancing)
    r.raw["scenario"] = {"seed": 1, "machine": {"name": "m"}, "kernel": {"numa_balancing": balancing},
                         "workloads": [{"kind": "numa02", "passes": passes}]}
    return r


def test_the_report_shows_what_differs_between_the_columns_scenarios():
    off = Column("off", [_resolved_like(False, 800)])
    on = Column("on", [_resolved_like(True, 800)], scenario_text="[kernel]\nnuma_balancing = true\n")
    diffs = scenario_differences([off, on])
    assert diffs == {"NUMA02": [("kernel.numa_balancing", [False, True])]}
    page = build_html([off, on])
    scenarios = page.split('<h2 id="scenarios">')[1]
    assert "<td>kernel.numa_balancing</td><td>false</td><td>true</td>" in scenarios
    assert "scenario.toml of the group" in scenarios and "numa_balancing = true" in scenarios
    assert len(scenarios.splitlines()) < 200

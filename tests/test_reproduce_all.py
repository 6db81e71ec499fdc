"""`numasim reproduce all` and `reproduce NAME --iterations N`, on a small monkeypatched
registry (the shipped experiments take minutes; they are tested on their own)."""

import json

import pytest

from conftest import SMALL_NUMA02
from numasim import reproduce_all as ra
from numasim.cli import main
from numasim.experiments import registry
from numasim.experiments.registry import Experiment, Row
from numasim.scenario import apply_overrides, load_scenario, to_toml


class Small(Experiment):
    """numa02 scaled down, balancing off and on; one referenced metric and two checks."""

    name = "small"
    description = "numa02 small, off vs on"
    columns = ["off", "on"]

    def scenarios(self, overrides=None):
        out = {}
        for c in self.columns:
            d = load_scenario(SMALL_NUMA02)
            d["kernel"]["numa_balancing"] = c == "on"
            out[c] = to_toml(apply_overrides(d, overrides or []))
        return out

    def evaluate(self, outcomes):
        res = {c: o.result for c, o in outcomes.items()}
        faults = {c: int(r.counters["numa_hint_faults"]) for c, r in res.items()}
        return [
            Row("elapsed_s", {c: r.elapsed_s for c, r in res.items()}, reference={"off": 0.25, "on": 0.20}),
            Row("numa_hint_faults", faults, reference={"on": 16384}, check="on > 0", ok=faults["on"] > 0),
            Row("seed", {"on": res["on"].seed}, check="seed is odd", ok=res["on"].seed % 2 == 1, kind="invariant"),
            Row("plain", {"on": 1.0}),
        ]


class Failing(Small):
    name = "failing"
    description = "a check that cannot hold"

    def evaluate(self, outcomes):
        return [Row("impossible", {"on": 1.0}, reference={"on": 2.0}, check="== 2", ok=False),
                Row("far", {"on": 5.0}, reference={"on": 2.0}, check="> 0", ok=True)]


@pytest.fixture
def small_registry(monkeypatch):
    monkeypatch.setattr(registry, "_load", lambda: None)
    monkeypatch.setattr(registry, "REGISTRY", {"small": Small(), "failing": Failing()})


def test_rel_error_of_rows():
    row = Row("x", {"a": 1.1, "b": None, "c": 5}, reference={"a": 1.0, "b": 3.0, "c": 0, "d": 1.0})
    assert row.rel_error() == {"a": pytest.approx(0.1)}
    assert Row("y", {"a": -0.95}, reference={"a": -0.98}).rel_error()["a"] == pytest.approx(0.03 / 0.98)
    assert row.to_dict()["rel_error"] == {"a": pytest.approx(0.1)}


def test_reproduce_all_table_and_summary(small_registry, capsys):
    assert main(["reproduce", "all", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "== failing" in out and "== small" in out
    assert out.index("== failing") < out.index("== small")  # name order
    head = next(l for l in out.splitlines() if l.startswith("metric"))
    assert head.split() == ["metric", "column", "simulated", "changelog", "rel.", "error", "tolerance", "ok"]
    line = next(l for l in out.splitlines() if l.startswith("impossible"))
    assert line.split() == ["impossible", "on", "1.000", "2.000", "-50.0%", "==", "2", "FAIL"]
    # one line per referenced column, the changelog value beside the simulated one
    hf = [l.split() for l in out.splitlines() if l.startswith("numa_hint_faults")]
    assert len(hf) == 1 and hf[0][:4] == ["numa_hint_faults", "on", "16384", "16384"] and hf[0][4] == "+0.0%"
    el = [l.split() for l in out.splitlines() if l.startswith("elapsed_s")]
    assert [x[1] for x in el] == ["off", "on"] and len(el[1]) == 5  # no check: no tolerance
    assert el[1][4] == f"{100 * (float(el[1][2]) - 0.2) / 0.2:+.1f}%"
    assert "plain measurement rows not shown" in out and "\nplain " not in out
    # a magnitude more than 2x off says so, though its claim holds
    far = next(l for l in out.splitlines() if l.startswith("far"))
    assert far.split() == ["far", "on", "5.000", "2.000", "+150.0%", ">2x", ">", "0", "ok"]
    seed = next(l for l in out.splitlines() if l.startswith("seed"))
    assert seed.rstrip().endswith("ok (invariant)")
    # claims counted apart from invariants and magnitudes
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("reproduce all: 1 of 2 experiments hold their tolerance (2 of 3 claims; 1 of 1 "
                           "invariants; 4 of 5 referenced magnitudes within 2x, "), last


def test_reproduce_all_json_and_strict(small_registry, capsys):
    assert main(["reproduce", "all", "--json", "--strict", "--jobs", "1"]) == 1  # 'failing' fails
    d = json.loads(capsys.readouterr().out)
    n = d["summary"]
    assert {k: n[k] for k in ("experiments", "experiments_hold", "checks", "checks_hold", "invariants",
                              "invariants_hold", "magnitudes", "magnitudes_within_2x")} == \
        {"experiments": 2, "experiments_hold": 1, "checks": 3, "checks_hold": 2, "invariants": 1,
         "invariants_hold": 1, "magnitudes": 5, "magnitudes_within_2x": 4}
    kinds = {r["metric"]: r["kind"] for e in d["experiments"] for r in e["rows"]}
    assert (kinds["seed"], kinds["numa_hint_faults"], kinds["plain"]) == ("invariant", "claim", "")
    small = next(e for e in d["experiments"] if e["experiment"] == "small")
    assert small["rows"][1]["rel_error"] == {"on": 0.0}


def test_reproduce_iterations_mean_and_checks_over_seeds(small_registry, capsys):
    assert main(["reproduce", "small", "--iterations", "3", "--jobs", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = {r["metric"]: r for r in d["rows"]}
    assert d["experiment"] == "small x3"
    assert rows["seed"]["values"] == {"on": 2.0}  # seeds 1, 2, 3
    assert rows["seed"]["ok"] is False and "held in 2 of 3" in rows["seed"]["check"]
    assert rows["numa_hint_faults"]["ok"] is True and "held in 3 of 3" in rows["numa_hint_faults"]["check"]
    assert d["pass"] is False
    assert main(["reproduce", "all", "--iterations", "2"]) == 2  # a usage error

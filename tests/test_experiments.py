"""Experiments: the registry, the report shape, parallel == serial."""

import json

import pytest

from numasim import experiments
from numasim.experiments.registry import ExperimentResult, Row

from conftest import SMALL_OVERRIDES, numasim_cli, one_json_object

ROW_KEYS = {"metric", "values", "check", "ok", "kind"}


def check_shape(obj, name, columns):
    assert set(obj) == {"experiment", "columns", "rows", "pass"}
    assert obj["experiment"] == name and obj["columns"] == columns
    assert isinstance(obj["pass"], bool)
    assert obj["pass"] == all(r["ok"] for r in obj["rows"])
    for r in obj["rows"]:
        assert ROW_KEYS <= set(r) <= ROW_KEYS | {"reference", "rel_error"}, r
        assert ("rel_error" in r) == ("reference" in r), r  # relative error wherever a reference is
        assert set(r.get("rel_error", {})) <= set(r.get("reference", {}))
        assert isinstance(r["ok"], bool) and isinstance(r["check"], str)
        assert set(r["values"]) <= set(columns)
        for v in r["values"].values():
            assert v is None or isinstance(v, (int, float))
        assert set(r.get("reference", {})) <= set(columns)


def test_registry():
    assert "autonuma-balancing" in experiments.names()
    exp = experiments.get("autonuma-balancing")
    assert exp.columns == ["off", "on"]
    with pytest.raises(KeyError):
        experiments.get("nope")


def test_table_and_json_of_a_hand_made_result():
    res = ExperimentResult("x", ["off", "on"], [
        Row("a elapsed_s", {"off": 1.5, "on": 1.25}, reference={"on": 1.0}),
        Row("a check", {"on": 0.1}, check="<= 0.15", ok=True),
        Row("b check", {"off": None}, check="== 0", ok=False),
    ])
    obj = json.loads(res.to_json())
    check_shape(obj, "x", ["off", "on"])
    assert obj["pass"] is False and obj["rows"][0]["reference"] == {"on": 1.0}
    assert obj["rows"][0]["rel_error"] == {"on": 0.25}  # (1.25 - 1.0) / 1.0
    table = res.to_table()
    assert "1.250 (ref 1.000)" in table and "FAIL" in table and table.endswith("x: FAIL")
    assert table.splitlines()[2].rstrip().endswith("1.250 (ref 1.000)")  # no check, no verdict


def test_scaled_down_parallel_equals_serial():
    exp = experiments.get("autonuma-balancing")
    small = list(SMALL_OVERRIDES.items())
    serial = exp.run(max_workers=1, overrides=small)
    parallel = exp.run(max_workers=2, overrides=small)
    assert serial.to_json() == parallel.to_json()
    obj = json.loads(serial.to_json())
    check_shape(obj, "autonuma-balancing", ["off", "on"])
    metrics = [r["metric"] for r in obj["rows"]]
    for t in ("numa01", "numa01_THREAD_ALLOC", "numa02", "numa02_SMT",
              "numa02_HARD_BIND", "numa02_INVERSE_BIND"):
        for m in ("elapsed_s", "system_s", "numa_hint_faults", "numa_hint_faults_local",
                  "numa_pages_migrated", "numa_pte_updates", "hint_local_pct_last10"):
            assert f"{t} {m}" in metrics
    complete = next(r for r in obj["rows"] if r["metric"] == "every test completes")
    assert complete["ok"], complete
    inv = next(r for r in obj["rows"] if r["metric"] == "every run: invariants hold")
    assert inv["ok"], inv


@pytest.mark.slow
def test_reproduce_autonuma_balancing_json():
    p = numasim_cli("reproduce", "autonuma-balancing", "--json", timeout=1800)
    assert p.returncode == 0, p.stderr
    obj = one_json_object(p.stdout)
    check_shape(obj, "autonuma-balancing", ["off", "on"])
    by = {r["metric"]: r for r in obj["rows"]}
    for name in ("numa02 off: zero hint faults",
                 "numa02 off: HARD_BIND ≤ elapsed ≤ INVERSE_BIND",
                 "every run: invariants hold",
                 "every test completes"):
        assert by[name]["ok"], by[name]
    assert by["numa02 off: zero hint faults"]["values"] == {"off": 0}
    # numa02's convergence checks were set for a bare buffer; with the glibc image the thread
    # stacks delay the first pass (tests/test_acceptance.py measures that), and a failing row
    # must name that cause rather than pass quietly or fail without one
    for name in ("numa02 on: hint-local % over last 10% of time ≥ 80",
                 "numa02 on: elapsed within 15% of numa02_HARD_BIND"):
        assert by[name]["ok"] or "known cause: numa02's 128 thread stacks" in by[name]["check"], by[name]
    assert obj["pass"] == all(r["ok"] for r in obj["rows"])

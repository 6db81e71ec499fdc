"""Bad scenarios raise ScenarioError with loc/kind/msg; never a PanicException."""

import pytest

import numasim
from numasim import _engine

from conftest import BAD, SMALL_NUMA02, expectation


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_fixture_raises_scenario_error(path):
    want = expectation(path)
    with pytest.raises(numasim.ScenarioError) as info:
        numasim.run(path)
    errors = info.value.errors
    assert isinstance(errors, list) and errors
    for e in errors:
        assert {"loc", "kind", "msg"} <= set(e) and e["msg"], e
    kinds = [e["kind"] for e in errors]
    assert want["kind"] in kinds, kinds
    if "loc" in want:
        assert any(want["loc"] in e["loc"] for e in errors), errors


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_resolve_rejects_the_same(path):
    with pytest.raises(numasim.ScenarioError):
        _engine.resolve(path.read_text())


def test_all_problems_reported_at_once():
    text = "[kernel]\nhz = 7\n[run]\nmax_sim_s = -1.0\n[[workload]]\nkind = \"numa03\"\n"
    with pytest.raises(numasim.ScenarioError) as info:
        _engine.resolve(text)
    locs = " ".join(e["loc"] for e in info.value.errors)
    assert len(info.value.errors) >= 3, info.value.errors
    assert "kernel.hz" in locs and "run.max_sim_s" in locs and "workload" in locs


@pytest.mark.parametrize("text", [
    "", "seed = -1", "seed = \"x\"", "[[workload]]\nkind = 3", "workload = 5",
    "[machine]\nsmt = 0\n[[workload]]\nkind = \"numa02\"",
    "[machine]\ncpus_per_node = 3\nsmt = 2\n[[workload]]\nkind = \"numa02\"",
    "[machine]\nnodes = 1000\n[[workload]]\nkind = \"numa02\"",
    "[machine]\nprofile = \"nope\"\n[[workload]]\nkind = \"numa02\"",
    "[kernel.features]\nno-such-feature = true\n[[workload]]\nkind = \"numa02\"",
    "[kernel]\nhz = 0\n[[workload]]\nkind = \"numa02\"",
    "[run]\nsample_interval_ms = 0\n[[workload]]\nkind = \"numa02\"",
    "[[workload]]\nkind = \"numa02\"\nthreads = 0",
    "[[workload]]\nkind = \"numa02\"\nsize_mib = -5",
])
def test_odd_inputs_give_numasim_errors_not_panics(text):
    """Whatever the engine thinks of these, only NumasimError may come out."""
    try:
        _engine.resolve(text)
    except numasim.ScenarioError as exc:
        assert exc.errors and all(e["msg"] for e in exc.errors)
    except BaseException as exc:  # PanicException derives from BaseException
        pytest.fail(f"{type(exc).__name__} escaped: {exc}")


def test_capacity_error_when_host_too_small():
    with pytest.raises(numasim.CapacityError):
        _engine.run(SMALL_NUMA02.read_text(), 4096)


def test_unknown_machine_profile_toml():
    with pytest.raises(numasim.NumasimError):
        numasim.machine_profile_toml("no-such-machine")


def test_simulated_oom_is_a_numasim_error_not_a_bug():
    # numa02_HARD_BIND binds half the 1 GiB buffer to node 0, which has 256 MiB
    with pytest.raises(numasim.NumasimError) as info:
        numasim.run(workload="numa02_HARD_BIND", balancing=False,
                    overrides={"machine.memory_gib_per_node": [0.25, 2.0]})
    assert not isinstance(info.value, numasim.InternalError)
    assert isinstance(info.value, numasim.SimulationError)
    assert "out-of-memory" in str(info.value)

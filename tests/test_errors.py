"""Bad scenarios raise ScenarioError with loc/kind/msg; never a PanicException."""

import copy
import random
from pathlib import Path

import pytest

import numasim
from numasim import _engine
from numasim.experiments import registry
from numasim.scenario import to_toml, tomllib

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


# ---------------------------------------------------------------- mutation fuzzing

FUZZ_VALUES = [0, -1, 1, 2, 9, 1023, 2**31, 2**63 - 1, 0.0, -0.5, 0.5, 1e-9, 1e300,
               float("nan"), float("inf"), "", "x", True, [], [0], [1, 2], {}]


def _leaf_paths(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaf_paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaf_paths(v, path + (i,))
    if path:
        yield path


def _mutate(scenario: dict, rng, numbers_only: bool) -> dict:
    """One or two edits: delete a key, scale or shift a number, or put an odd value anywhere."""
    s = copy.deepcopy(scenario)
    for _ in range(rng.choice([1, 1, 2])):
        paths = list(_leaf_paths(s))
        if numbers_only:
            paths = [p for p in paths if _is_number(_get(s, p))] or paths
        p = rng.choice(paths)
        parent, old = _get(s, p[:-1]), _get(s, p)
        r = rng.random()
        if r < 0.1 and isinstance(parent, dict):
            del parent[p[-1]]
        elif _is_number(old) and (numbers_only or r < 0.55):
            new = rng.choice([old * rng.choice([0, -1, 0.5, 2, 10, 1000]), old + rng.choice([-1, 1]),
                              rng.choice(FUZZ_VALUES)])
            if isinstance(old, int) and isinstance(new, float) and new == new and abs(new) < 2**62:
                new = int(new)
            parent[p[-1]] = new
        else:
            parent[p[-1]] = rng.choice(FUZZ_VALUES)
    return s


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _get(node, path):
    for k in path:
        node = node[k]
    return node


def _shipped_scenarios() -> list:
    out = [tomllib.loads(t) for name in registry.names() for t in registry.get(name).scenarios().values()]
    return out + _small_scenarios()


def _small_scenarios() -> list:
    return [tomllib.loads(p.read_text()) for p in SHIPPED_SMALL]


# the small scenarios that train the profile-guided build
SHIPPED_SMALL = sorted((Path(__file__).parent.parent / "scripts" / "pgo").glob("*.toml"))


def _only_numasim_errors(call):
    """Run call(); True if it succeeded, False on a NumasimError other than InternalError."""
    try:
        call()
        return True
    except numasim.InternalError as exc:
        pytest.fail(f"engine bug: {exc}")
    except numasim.NumasimError:
        return False
    except BaseException as exc:  # PanicException derives from BaseException
        pytest.fail(f"{type(exc).__name__} escaped: {exc}")


def test_mutated_shipped_scenarios_never_escape_as_bugs():
    """2000 seeded mutations of every shipped scenario (experiments and PGO training runs):
    resolving each gives a result or a NumasimError, never an InternalError (a caught panic)
    or a Python exception. A validation rule that lets a bad value through to an engine
    assertion fails here."""
    seeds = _shipped_scenarios()
    rng = random.Random(20261124)
    resolved = 0
    for i in range(2000):
        s = _mutate(rng.choice(seeds), rng, numbers_only=i % 2 == 0)
        text = to_toml(s)
        resolved += _only_numasim_errors(lambda: _engine.resolve(text))
    assert 0 < resolved < 2000, f"{resolved} of 2000 mutations resolved: the mutator is broken"


def test_mutated_small_scenarios_run_or_fail_cleanly():
    """Numeric mutations of the small training scenarios that still resolve also run (0.3 s of
    simulated time) without an engine bug: in-range values the validator accepts must be
    values the engine can simulate."""
    seeds = _small_scenarios()
    assert seeds, "scripts/pgo/*.toml missing"
    rng = random.Random(7)
    ran = 0
    for _ in range(40):
        s = _mutate(rng.choice(seeds), rng, numbers_only=True)
        if not isinstance(s.get("run"), dict):
            s["run"] = {}
        s["run"]["max_sim_s"] = 0.3
        text = to_toml(s)
        if not _only_numasim_errors(lambda: _engine.resolve(text)):
            continue
        if _engine.estimate_host_bytes(text) > 2 << 30:
            continue
        ran += _only_numasim_errors(lambda: _engine.run(text))
    assert ran >= 10, f"only {ran} mutated scenarios ran"


@pytest.mark.parametrize("key, value", [("run.numa_maps_interval_ms", "0"),
                                        ("workload.local_threads", "-1")])
def test_new_keys_are_checked(key, value):
    # run.numa_maps_interval_ms (real-kernel runner only) and remote_toucher.local_threads
    run = f"[run]\nnuma_maps_interval_ms = {value}\n" if key.startswith("run") else ""
    extra = f"local_threads = {value}\n" if key.startswith("workload") else ""
    text = f"{run}[[workload]]\nkind = \"remote_toucher\"\nduration_s = 1.0\n{extra}"
    with pytest.raises(numasim.ScenarioError) as info:
        _engine.resolve(text)
    assert any(e["loc"].endswith(key.split(".")[1]) and e["kind"] == "invalid_value" for e in info.value.errors), info.value.errors

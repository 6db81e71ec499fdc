"""The native module is the real, compiled engine and exposes the contract."""

import json

import numasim
from numasim import _engine


def test_engine_is_the_compiled_extension():
    assert _engine.__file__.endswith(".so"), _engine.__file__


def test_exception_tree():
    assert issubclass(numasim.NumasimError, Exception)
    for cls in (numasim.ScenarioError, numasim.CapacityError, numasim.InternalError):
        assert issubclass(cls, numasim.NumasimError)
    assert numasim.ScenarioError is _engine.ScenarioError


def test_machine_profiles_include_the_seed_machines():
    names = numasim.machine_profiles()
    for n in ("xeon-platinum-2n-128c", "intel-2s-128g", "intel-4s-48c"):
        assert n in names
    assert numasim.DEFAULT_MACHINE in names


def test_machine_profile_toml_is_toml_with_comments():
    from numasim.scenario import tomllib

    text = numasim.machine_profile_toml("xeon-platinum-2n-128c")
    assert "#" in text  # sources are cited in comments
    assert tomllib.loads(text)["nodes"] == 2


def test_features_table():
    feats = numasim.features()
    assert feats, "no features listed"
    keys = {"name", "since", "seed", "summary", "modelled", "default"}
    for f in feats:
        assert keys <= set(f), f
        assert isinstance(f["modelled"], bool) and isinstance(f["default"], bool)
    assert len({f["name"] for f in feats}) == len(feats)
    assert json.loads(_engine.features()) == feats


REMOTE_TOUCHER = """
[machine]
profile = "intel-2s-128g"
cpus_per_node = 2
memory_gib_per_node = 2
[[workload]]
kind = "remote_toucher"
size_mib = 16
duration_s = 4
"""


def test_progress_callback_sees_time_advance_and_changes_nothing():
    calls = []
    with_cb = _engine.run(REMOTE_TOUCHER, None, progress=lambda *a: calls.append(a))
    assert with_cb == _engine.run(REMOTE_TOUCHER, None), "progress slices must not change the result"
    times = [c[0] for c in calls]
    assert len(calls) >= 4 and times == sorted(times) and len(set(times)) == len(times)
    events = [c[2] for c in calls]
    assert events == sorted(events) and events[-1] > 0
    assert all(c[1] == 7200 * 10**9 for c in calls)  # run.max_sim_s default


def test_exception_in_progress_callback_stops_the_run():
    class Stop(Exception):
        pass

    def stop(*_):
        raise Stop

    try:
        _engine.run(REMOTE_TOUCHER, None, progress=stop)
    except Stop:
        return
    raise AssertionError("the callback's exception did not propagate")

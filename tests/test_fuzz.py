"""Coverage-guided fuzzing of the scenario parser and resolver (fuzz/scenario_fuzz.py, atheris):
a short campaign from the shipped scenarios, and the harness itself (issue 29, item 17).
docs/fuzzing.md records the long campaign (`make fuzz`)."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FUZZ = ROOT / "fuzz"
CAMPAIGN_S = 25  # the short campaign of `make test`

atheris = pytest.importorskip("atheris", reason="atheris is in requirements-dev.txt (make setup)")


def _harness():
    spec = importlib.util.spec_from_file_location("scenario_fuzz", FUZZ / "scenario_fuzz.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_a_short_campaign_finds_no_crash_no_exception_no_hang(tmp_path):
    seeds, corpus, artifacts = tmp_path / "seeds", tmp_path / "corpus", tmp_path / "artifacts"
    subprocess.run([sys.executable, str(FUZZ / "seeds.py"), str(seeds)], check=True, capture_output=True)
    corpus.mkdir()
    artifacts.mkdir()
    p = subprocess.run([sys.executable, str(FUZZ / "scenario_fuzz.py"), f"-max_total_time={CAMPAIGN_S}",
                        "-print_final_stats=1", f"-artifact_prefix={artifacts}/", str(corpus), str(seeds)],
                       capture_output=True, text=True, timeout=CAMPAIGN_S + 120)
    log = p.stderr
    assert p.returncode == 0, log[-3000:]
    assert not list(artifacts.iterdir()), log[-3000:]  # no crash-*, timeout-* or oom-* input
    runs = int(re.search(r"stat::number_of_executed_units: (\d+)", log).group(1))
    assert runs >= 500, log[-2000:]
    if (ROOT / "target/fuzz-engine/_engine.so").exists():  # make test builds it
        assert "scenario_fuzz: instrumented engine" in log


@pytest.fixture
def one_input(tmp_path):
    return _harness().make_target(tmp_path)


def test_bad_input_is_fine_but_anything_else_is_a_crash(one_input, monkeypatch):
    from numasim import _engine

    one_input((ROOT / "tests/fixtures/good/numa02-small.toml").read_bytes() + b"\0workload.passes=3")
    one_input(b"[machine")  # toml_syntax: a ScenarioError
    one_input(b"\xff\xfe")  # not UTF-8: a UsageError, a NumasimError too
    one_input(b"seed = 1979-05-27\0seed=2")  # a TOML date with --set (once a TypeError)
    for exc in (_engine.InternalError("engine panic"), KeyError("x"), RecursionError()):
        def boom(text, exc=exc):
            raise exc

        monkeypatch.setattr(_engine, "resolve", boom)
        with pytest.raises(type(exc)):
            one_input(b"[[workload]]\nkind = 'numa02'\n")


def test_the_seeds_are_the_shipped_scenarios(tmp_path):
    seeds = _harness  # noqa: F841 - the harness module imports cleanly
    spec = importlib.util.spec_from_file_location("seeds", FUZZ / "seeds.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    data = mod.seeds()
    examples = [p.read_bytes() for p in (ROOT / "python/numasim/examples").glob("*.toml")]
    assert len(data) > 100 and all(e in data for e in examples)
    assert any(b"\0" in d for d in data)  # some carry --set overrides


def test_default_flags_bound_each_input_at_10_s():
    h = _harness()
    assert "-timeout=10" in h.with_defaults(["x", "corpus"])
    assert h.with_defaults(["x", "-timeout=3"]).count("-timeout=3") == 1
    assert not any(a.startswith("-timeout=10") for a in h.with_defaults(["x", "-timeout=3"]))

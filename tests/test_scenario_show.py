"""`numasim scenario show` writes the resolved scenario back as scenario TOML: every shipped
scenario and example comes back to the same resolved scenario (issue 29, item 12)."""

import importlib.util
from pathlib import Path

import pytest

import numasim
from numasim import examples
from numasim.scenario_show import resolved_toml

ROOT = Path(__file__).resolve().parent.parent


def _shipped() -> dict:
    spec = importlib.util.spec_from_file_location("shipped", ROOT / "scripts/shipped-scenarios.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.shipped()
    out.update({f"example-{n}": examples.path(n).read_text() for n in examples.names()})
    return out


SHIPPED = _shipped()


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_resolved_toml_resolves_to_the_same_scenario(name):
    resolved = numasim.resolve(SHIPPED[name])
    text = resolved_toml(resolved)
    assert numasim.resolve(text) == resolved
    assert "topology" not in text  # the user's keys, not the engine's resolved form


def test_it_writes_node_lists_and_pattern_names_as_a_user_does():
    text = resolved_toml(numasim.resolve(examples.path("four-node-mix")))
    assert "nodes = [3]" in text and 'pattern = "pareto"' in text and "nodes = 4" in text


@pytest.mark.parametrize("overrides", [
    {"kernel.numa_balancing": 3, "kernel.sysctl.numa_balancing_promote_rate_limit_MBps": 10,
     "kernel.sysctl.numa_balancing_hot_threshold_ms": 500, "kernel.sysctl.watermark_scale_factor": 100},
    {"kernel.version": "5.19", "kernel.sysctl.demotion_enabled": False, "machine.hmat": True},
    {"kernel.numa_balancing": 0},
])
def test_tiering_keys_come_back(overrides):
    """kernel.numa_balancing's bits, the tiering sysctls (only where the release has them) and
    the machine's memory types and HMAT survive the round trip."""
    resolved = numasim.resolve(examples.path("memory-tiering").read_text(), overrides=overrides)
    assert numasim.resolve(resolved_toml(resolved)) == resolved

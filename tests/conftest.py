"""Shared helpers: the CLI as a subprocess, small scenarios, fixtures."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
BAD = sorted((FIXTURES / "bad").glob("*.toml"))
SMALL_NUMA02 = FIXTURES / "good" / "numa02-small.toml"

# A small tiered machine, numa_balancing = 2 on 6.12 with demotion: a DRAM node with 4 CPUs
# (2 GiB) and a CPU-less kmem node (4 GiB) of intel-2s-128g; tests add [machine.cost] and
# their [[workload]]s (tests/test_tiering.py, tests/test_plot.py).
TIERED_KERNEL = """
seed = 1
[kernel]
version = "6.12"
numa_balancing = 2
[kernel.sysctl]
demotion_enabled = true
"""
TIERED_MACHINE = TIERED_KERNEL + """[machine]
profile = "intel-2s-128g"
cpus_per_node = [4, 0]
memory_type = ["dram", "kmem"]
memory_gib_per_node = [2, 4]
"""

# A scaled-down numa02 (as fixtures/good/numa02-small.toml): 2 nodes x 4 CPUs,
# 64 MiB, 20 passes, scanner delay/period 100 ms so balancing acts in ~0.3 s, the buffer
# without a process image.
SMALL_OVERRIDES = {
    "machine.cpus_per_node": 4,
    "workload.size_mib": 64,
    "workload.passes": 20,
    "kernel.sysctl.numa_balancing_scan_delay_ms": 100,
    "kernel.sysctl.numa_balancing_scan_period_min_ms": 100,
    "workload.image": "none",
}
SMALL_SETS = [a for k, v in SMALL_OVERRIDES.items() for a in ("--set", f"{k}={v}")]


def expectation(path: Path) -> dict:
    """`# expect: kind=X loc=Y` from a bad fixture's first line."""
    m = re.match(r"#\s*expect:\s*(.*)", path.read_text().splitlines()[0])
    return dict(kv.split("=", 1) for kv in m.group(1).split())


def numasim_cli(*args, env=None, timeout=600):
    """Run `python -m numasim ARGS` and return the CompletedProcess."""
    e = dict(os.environ)
    e.pop("NUMASIM_BACKTRACE", None)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "numasim", *map(str, args)],
        capture_output=True, text=True, env=e, timeout=timeout,
    )


def one_json_object(stdout: str) -> dict:
    """stdout must hold exactly one JSON object and nothing else."""
    obj, end = json.JSONDecoder().raw_decode(stdout.strip())
    assert end == len(stdout.strip()), "extra output after the JSON object"
    assert isinstance(obj, dict)
    return obj


@pytest.fixture(scope="session")
def small_result():
    import numasim

    return numasim.run(SMALL_NUMA02)

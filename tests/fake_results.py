"""Hand-made results (engine-shaped JSON) for report tests that need exact numbers."""

import json

from numasim.result import Result


def fake_result(kind="numa02", system_s=1.0, elapsed_s=10.0, user_s=100.0, counters=None, seed=1,
                balancing=True, throughput=None):
    """A Result with the engine's keys: counters, times, scenario, series (two vmstat
    samples, one memory sample), processes."""
    c = {"numa_pte_updates": 0, "numa_huge_pte_updates": 0, "numa_hint_faults": 0,
         "numa_hint_faults_local": 0, "numa_pages_migrated": 0, "pgmigrate_success": 0,
         "pgmigrate_fail": 0, "pgfault": 0}
    c.update(counters or {})
    vm = {"time_s": [0.0, elapsed_s]}
    for k, v in c.items():
        vm[k] = [0, v]
    obj = {
        "completed": True,
        "counters": c,
        "times": {"elapsed_s": elapsed_s, "system_s": system_s, "user_s": user_s},
        "scenario": {"machine": {"profile": "xeon-platinum-2n-128c"},
                     "kernel": {"numa_balancing": balancing}, "workload": [{"kind": kind}]},
        "seed": seed,
        "processes": [{"pid": 1000, "comm": kind, "throughput_aps": throughput or 0.0}],
        "series": {"vmstat": vm, "memory": {"time_s": [0.0], "pid": [1000], "node": [0], "pages": [1]}},
    }
    return Result(json.dumps(obj))

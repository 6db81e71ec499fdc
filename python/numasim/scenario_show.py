"""`numasim scenario show`: a resolved scenario written back as scenario TOML, every default
filled in, which `numasim run` accepts and resolves to the same scenario."""

from __future__ import annotations

from numasim.scenario import to_toml

PAGES_PER_GIB = 262144  # 4 KiB pages
AUTONUMA_DROP = ("test", "bind", "processes")  # implied by `kind`
PATTERNS = {"Linear": "linear", "Uniform": "uniform", "Normal": "normal", "NormalIh": "normal_ih",
            "Pareto": "pareto"}


def _nodes(mask: int) -> list:
    """A node mask of the resolved form as the node list a scenario writes."""
    return [n for n in range(8) if mask >> n & 1]


def _machine(m: dict) -> dict:
    topo = m["topology"]
    out = {
        "name": m["name"],
        "description": m["description"],
        "nodes": topo["nr_nodes"],
        "cpus_per_node": [len(cpus) for cpus in topo["node_cpus"]],
        "smt": topo["smt"],
        "memory_gib_per_node": [pages / PAGES_PER_GIB for pages in topo["node_pages"]],
        "distances": topo["distance"],
        "fragmentation": m["fragmentation"],
    }
    if "memory_type" in m:  # echoed only when some node is not DRAM
        out["memory_type"] = m["memory_type"]
    if m.get("hmat"):
        out["hmat"] = True
    if m.get("host_cores") is not None:
        out["host_cores"] = m["host_cores"]
        out["steal_in_runtime"] = m.get("steal_in_runtime", 1.0)
    if m.get("tick_sys_share"):
        out["tick_sys_share"] = m["tick_sys_share"]
    out["cost"] = dict(m["cost"])
    return out


def _kernel(k: dict) -> dict:
    out = {}
    if k.get("version") is not None:
        out["version"] = k["version"]
    out.update(numa_balancing=k["numa_balancing"], hz=k["hz"], sysctl=dict(k["sysctl"]),
               features=dict(k["features"]), variants=dict(k["variants"]))
    tiering = k.get("tiering")  # echoed only for numa_balancing 2/3 or tiering knobs off default
    if tiering is not None:
        out["numa_balancing"] = tiering["mode"]
        knobs = {"numa_balancing_promote_rate_limit_MBps": ("promote_rate_limit_mbps", 65536),
                 "numa_balancing_hot_threshold_ms": ("hot_threshold_ms", 1000),
                 "demotion_enabled": ("demotion_enabled", False), "watermark_scale_factor": ("watermark_scale_factor", 10)}
        # each knob only where it differs from the default: a release without it refuses it
        out["sysctl"].update({name: tiering[key] for name, (key, default) in knobs.items() if tiering[key] != default})
    sizes = {f"{4 << order}K": mode for order, mode in enumerate(k["thp"]["sizes"]) if order >= 2}
    out["thp"] = {"enabled": k["thp"]["enabled"], "sizes": sizes}
    return out


def _workload(w: dict, image: str) -> dict:
    w = {key: v for key, v in w.items() if v is not None}
    if w["kind"] in ("pmbench", "kvm_guest") and isinstance(w.get("nodes"), int):
        w["nodes"] = _nodes(w["nodes"])
    if w["kind"] == "pmbench":
        w["pattern"] = PATTERNS.get(w["pattern"], w["pattern"])
    if "test" in w and "bind" in w:  # autonuma-benchmark
        for key in AUTONUMA_DROP:
            w.pop(key, None)
    if w["kind"] == "program":
        w = _program(w)
    w["image"] = image
    return w


def _given(d: dict) -> dict:
    return {key: v for key, v in d.items() if v is not None}


def _program(w: dict) -> dict:
    """A resolved `program` under its input keys: buffer, process, process.thread."""
    ops = lambda items: [_given(o) for o in items]  # noqa: E731
    procs = []
    for proc in w.pop("processes"):
        p = _given({key: v for key, v in proc.items() if key not in ("main", "threads")})
        if proc["main"]:
            p["main"] = ops(proc["main"])
        threads = [dict(_given({key: v for key, v in t.items() if key != "ops"}), ops=ops(t["ops"])) for t in proc["threads"]]
        if threads:
            p["thread"] = threads
        procs.append(p)
    w["buffer"] = w.pop("buffers")
    w["process"] = procs
    return w


def resolved_toml(resolved: dict) -> str:
    """The resolved scenario ``resolved`` (numasim.resolve) as scenario TOML."""
    images = resolved.get("images") or ["glibc"] * len(resolved["workloads"])
    d = {
        "seed": resolved["seed"],
        "machine": _machine(resolved["machine"]),
        "kernel": _kernel(resolved["kernel"]),
        "workload": [_workload(w, img) for w, img in zip(resolved["workloads"], images)],
        "run": dict(resolved["run"]),
    }
    head = ("# The fully resolved scenario (numasim scenario show): every default filled in.\n"
            "# `numasim run` accepts it as it is.\n")
    return head + to_toml(d)

"""Result: the engine's result JSON with pandas views and sanity checks."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd

PAGE_SIZE = 4096
GIB = 1 << 30
MIB = 1 << 20


class IncompleteRunWarning(UserWarning):
    """A run stopped at run.max_sim_s before its workloads finished: its times are the
    limit, not the workloads'."""


class Result:
    """One simulated run. ``raw`` is the parsed result JSON; ``json_text`` the
    engine's exact string (kept so determinism can be checked byte for byte)."""

    def __init__(self, json_text: str):
        self.json_text = json_text
        self.raw = json.loads(json_text)

    # ------------------------------------------------------------ plain data
    @property
    def counters(self) -> dict:
        return self.raw["counters"]

    @property
    def times(self) -> dict:
        return self.raw["times"]

    @property
    def elapsed_s(self) -> float:
        return float(self.times["elapsed_s"])

    @property
    def processes(self) -> list:
        return self.raw.get("processes", [])

    @property
    def completed(self) -> bool:
        """Every workload finished before run.max_sim_s."""
        if "completed" in self.raw:
            return bool(self.raw["completed"])
        limit = self.max_sim_s
        return limit is None or self.elapsed_s < limit

    @property
    def run_id(self) -> str:
        """The run's id: the first 16 hex digits of the SHA-256 of its JSON text (the same
        scenario and seed give the same id). Parquet sidecars record it."""
        return hashlib.sha256(self.json_text.encode("utf-8")).hexdigest()[:16]

    @property
    def scenario(self) -> dict:
        return self.raw.get("scenario", {})

    @property
    def seed(self):
        return self.raw.get("seed")

    @property
    def sim(self) -> dict:
        return self.raw.get("sim", {})

    @property
    def interrupts(self) -> dict:
        return self.raw.get("interrupts", {})

    @property
    def max_sim_s(self):
        """The run's simulated-time limit (run.max_sim_s), or None if the result lacks it."""
        limit = self.scenario.get("run", {}).get("max_sim_s")
        return None if limit is None else float(limit)

    def incomplete_message(self) -> str:
        """Why this run must not be read as finished ("" when it completed)."""
        if self.completed:
            return ""
        limit = self.max_sim_s
        at = f" = {limit:g} s" if limit is not None else ""
        return (f"the run stopped at run.max_sim_s{at} before its workloads finished: "
                f"its times are the limit, not the workloads' (raise run.max_sim_s)")

    def __repr__(self) -> str:
        kinds = ",".join(p.get("comm", "?") for p in self.processes)
        mark = "" if self.completed else " INCOMPLETE (stopped at run.max_sim_s)"
        return f"<numasim.Result {kinds} elapsed_s={self.elapsed_s:.3f} seed={self.seed}{mark}>"

    # ------------------------------------------------------------ frames
    @property
    def vmstat(self) -> pd.DataFrame:
        """Cumulative /proc/vmstat counters per sample, indexed by time_s."""
        series = dict(self.raw["series"]["vmstat"])
        return pd.DataFrame(series).set_index("time_s")

    @property
    def memory(self) -> pd.DataFrame:
        """Resident 4 KiB pages per (time_s, pid, node), long format: columns time_s, pid,
        node, pages, mib (the pages in MiB)."""
        m = pd.DataFrame(self.raw["series"]["memory"], columns=["time_s", "pid", "node", "pages"])
        m["mib"] = m["pages"].astype(float) * PAGE_SIZE / MIB
        return m

    @property
    def tasks(self) -> pd.DataFrame:
        """Each thread at each tasks sample (every run.placement_interval_ms), sorted by
        (time_s, pid, tid). Columns: time_s, pid, tid, comm, cpu_node (the node of its CPU),
        preferred_nid (-1: none). Empty with these columns when no sample was taken."""
        from numasim.frames import tasks_frame

        return tasks_frame(self)

    @property
    def placement(self) -> pd.DataFrame:
        """Where each process's pages are at each placement sample: its mapped pages cut into
        64 equal address ranges (buckets). Columns: time_s, pid, bucket, node, pages, mib."""
        from numasim.frames import placement_frame

        return placement_frame(self)

    def thread_nodes(self) -> pd.DataFrame:
        """Threads of each process per node (of their CPU) at each tasks sample. Columns:
        time_s, pid, comm, node, threads."""
        from numasim.frames import thread_nodes_frame

        return thread_nodes_frame(self)

    def summary(self) -> pd.DataFrame:
        """One row: scenario (the test, e.g. NUMA02), kernel (version; None: the default),
        numa_balancing, machine, seed, completed, elapsed_s, user_s, system_s,
        hint_local_percent, the final counters numa_pte_updates, numa_huge_pte_updates,
        numa_hint_faults, numa_hint_faults_local, numa_pages_migrated, pgmigrate_success,
        pgmigrate_fail, nr_tlb_remote_flush, nr_tlb_remote_flush_received (TLB shootdown
        IPIs), numa_pages_migrated_mib, pgmigrate_success_mib, run_id."""
        from numasim.frames import summary_row

        return pd.DataFrame([summary_row(self)])

    def memory_per_node(self) -> pd.DataFrame:
        """Rows: time_s; columns: (pid, node); values: resident pages."""
        m = self.memory
        return m.pivot_table(index="time_s", columns=["pid", "node"], values="pages",
                             aggfunc="sum", fill_value=0)

    def numastat(self):
        """Per-node allocation counters as /sys/devices/system/node/nodeN/numastat at the end
        (rows numa_hit ... other_node, columns node0, node1, ...); None for older results."""
        from numasim.numastat import node_counters

        return node_counters(self)

    def process_memory(self) -> pd.DataFrame:
        """``numastat -p``: each process's resident MiB per node (and Total) at its last
        sample before it exited."""
        from numasim.numastat import process_memory

        return process_memory(self)

    # ------------------------------------------------------------ metrics
    def hint_faults_window(self, last_fraction: float | None = None) -> tuple:
        """(hint faults, local hint faults) over the run, or over its last
        ``last_fraction`` of elapsed time: the final counters minus the vmstat
        sample at or before the window start."""
        faults = self.counters["numa_hint_faults"]
        local = self.counters["numa_hint_faults_local"]
        if last_fraction is not None:
            if not 0 < last_fraction <= 1:
                raise ValueError("last_fraction must be in (0, 1]")
            start = self.elapsed_s * (1.0 - last_fraction)
            vm = self.vmstat
            before = vm[vm.index <= start]
            if len(before):
                faults -= int(before["numa_hint_faults"].iloc[-1])
                local -= int(before["numa_hint_faults_local"].iloc[-1])
        return int(faults), int(local)

    def hint_local_tail(self, last_fraction: float = 0.1) -> tuple:
        """(percent, faults, start_s): hint-local % over the last ``last_fraction`` of
        elapsed time. After convergence the kernel may scan so rarely that no hint fault
        falls in that window; the window then reaches back to the start of the last scan
        window that took faults, so the figure always rests on real faults (faults == 0 only
        when the run had none)."""
        vm = self.vmstat
        start = self.elapsed_s * (1.0 - last_fraction)
        faults = vm["numa_hint_faults"]
        if self.hint_faults_window(last_fraction)[0] == 0 and self.counters["numa_hint_faults"] > 0:
            grew = faults.diff().fillna(faults) > 0
            last = faults.index[grew][-1]
            earlier = faults.index[faults.index < last]
            start = float(earlier[-1]) if len(earlier) else 0.0
        fraction = 1.0 - start / self.elapsed_s if self.elapsed_s > 0 else 1.0
        n, local = self.hint_faults_window(min(1.0, max(fraction, 1e-12)))
        pct = 100.0 * local / n if n > 0 else 100.0
        return pct, n, start

    def hint_local_percent(self, last_fraction: float | None = None) -> float:
        """100 * local / all NUMA hint faults (mmtests: 100 when there were none),
        over the run or its last ``last_fraction`` (e.g. 0.1) of elapsed time."""
        faults, local = self.hint_faults_window(last_fraction)
        if faults <= 0:
            return 100.0
        return 100.0 * local / faults

    # ------------------------------------------------------------ persistence
    def to_json(self) -> str:
        return self.json_text

    def save(self, path) -> None:
        """Write the JSON to a temporary name beside ``path``, then rename it into place."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            tmp.write_text(self.json_text, encoding="utf-8")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    @classmethod
    def load(cls, path) -> "Result":
        return cls(Path(path).read_text(encoding="utf-8"))

    # ------------------------------------------------------------ invariants
    def check_invariants(self) -> None:
        """Raise AssertionError naming the first broken invariant."""
        c = self.counters
        bad = {k: v for k, v in c.items() if not isinstance(v, (int, float)) or v < 0}
        assert not bad, f"negative or non-numeric counters: {bad}"
        assert c["numa_hint_faults_local"] <= c["numa_hint_faults"], (
            f"numa_hint_faults_local ({c['numa_hint_faults_local']}) > "
            f"numa_hint_faults ({c['numa_hint_faults']})")
        assert c["numa_pages_migrated"] <= c["pgmigrate_success"], (
            f"numa_pages_migrated ({c['numa_pages_migrated']}) > "
            f"pgmigrate_success ({c['pgmigrate_success']})")
        for k in ("elapsed_s", "user_s", "system_s"):
            assert self.times.get(k, 0) >= 0, f"times.{k} is negative: {self.times[k]}"
        self._check_vmstat()
        self._check_memory()

    def _check_vmstat(self) -> None:
        vm = self.vmstat
        assert vm.index.is_monotonic_increasing and vm.index.is_unique, (
            "vmstat time_s is not strictly increasing")
        for col in vm.columns:
            d = vm[col].diff().dropna()
            if (d < 0).any():
                t = d.index[(d < 0).to_numpy()][0]
                raise AssertionError(f"vmstat series {col} decreases at t={t}")
            if col in self.counters and len(vm) and vm[col].iloc[-1] > self.counters[col]:
                raise AssertionError(
                    f"vmstat series {col} ends above the final counter "
                    f"({vm[col].iloc[-1]} > {self.counters[col]})")

    def _check_memory(self) -> None:
        m = self.memory
        if m.empty:
            return
        assert (m["pages"] >= 0).all(), "negative resident pages in series.memory"
        caps = node_capacity_pages(self.scenario)
        per_node = m.groupby(["time_s", "node"])["pages"].sum()
        for (t, node), pages in per_node.items():
            cap = caps[int(node)] if int(node) < len(caps) else 0
            assert pages <= cap, (
                f"node {node} holds {pages} pages at t={t}, capacity {cap}")
        total = m.groupby("time_s")["pages"].sum()
        assert total.max() <= sum(caps), (
            f"{total.max()} resident pages exceed machine memory ({sum(caps)} pages)")


def node_capacity_pages(scenario: dict) -> list:
    """Pages per node from a resolved scenario's machine section."""
    m = scenario["machine"]
    topo = m.get("topology")
    if topo and "node_pages" in topo:  # the engine's resolved form
        return [int(p) for p in topo["node_pages"]]
    nodes, per = m["nodes"], m["memory_gib_per_node"]  # the user-facing form
    if not isinstance(per, list):
        per = [per] * int(nodes)
    return [int(g * GIB // PAGE_SIZE) for g in per]


def numa_balancing_label(scenario: dict) -> str:
    """sysctl kernel.numa_balancing as a title says it: ``off``, ``on`` (NUMA_BALANCING_NORMAL),
    ``2 (tiering)`` (NUMA_BALANCING_MEMORY_TIERING) or ``3 (normal+tiering)``."""
    k = scenario.get("kernel", {})
    if not k.get("numa_balancing"):
        return "off"
    mode = (k.get("tiering") or {}).get("mode", 1)
    return {2: "2 (tiering)", 3: "3 (normal+tiering)"}.get(mode, "on")

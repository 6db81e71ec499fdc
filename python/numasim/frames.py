"""Tidy pandas views of results (docs/results.md, "Python API"): per-run frames with
``time_s`` first, a one-row summary per run, and many saved runs as one long frame."""

from __future__ import annotations

import pandas as pd

PAGE_SIZE = 4096
MIB = 1 << 20

TASK_COLUMNS = ["time_s", "pid", "tid", "comm", "cpu_node", "preferred_nid"]
PLACEMENT_COLUMNS = ["time_s", "pid", "bucket", "node", "pages", "mib"]
THREAD_NODE_COLUMNS = ["time_s", "pid", "comm", "node", "threads"]
# Final counters in a summary row, in this order (0 when a result lacks one).
SUMMARY_COUNTERS = [
    "numa_pte_updates", "numa_huge_pte_updates", "numa_hint_faults", "numa_hint_faults_local",
    "numa_pages_migrated", "pgmigrate_success", "pgmigrate_fail",
    "nr_tlb_remote_flush", "nr_tlb_remote_flush_received",
]


def pages_to_mib(pages):
    """4 KiB pages as MiB (a number or a pandas Series)."""
    return pages * PAGE_SIZE / MIB


def _series(result, name: str) -> dict:
    s = result.raw.get("series", {}).get(name) or {}
    return {k: v for k, v in s.items() if isinstance(v, list)}


def _comms(result) -> dict:
    return {p.get("pid"): p.get("comm") for p in result.processes}


def tasks_frame(result) -> pd.DataFrame:
    """``series.tasks`` as TASK_COLUMNS, sorted by (time_s, pid, tid); empty (with those
    columns) when the run recorded no sample."""
    df = pd.DataFrame(_series(result, "tasks"), columns=[c for c in TASK_COLUMNS if c != "comm"])
    df.insert(3, "comm", df["pid"].map(_comms(result)).astype(object))
    return df.sort_values(["time_s", "pid", "tid"], kind="stable").reset_index(drop=True)


def placement_frame(result) -> pd.DataFrame:
    """``series.placement`` as PLACEMENT_COLUMNS (``mib`` = pages in MiB), sorted by
    (time_s, pid, bucket, node)."""
    df = pd.DataFrame(_series(result, "placement"), columns=PLACEMENT_COLUMNS[:-1])
    df["mib"] = pages_to_mib(df["pages"].astype(float))
    return df.sort_values(["time_s", "pid", "bucket", "node"], kind="stable").reset_index(drop=True)


def thread_nodes_frame(result) -> pd.DataFrame:
    """How many threads of each process ran on each node (the node of their CPU) at each
    tasks sample: THREAD_NODE_COLUMNS."""
    t = tasks_frame(result)
    df = (t.groupby(["time_s", "pid", "cpu_node"], sort=True).size()
          .rename("threads").reset_index().rename(columns={"cpu_node": "node"}))
    df.insert(2, "comm", df["pid"].map(_comms(result)).astype(object))
    return df[THREAD_NODE_COLUMNS]


def summary_row(result) -> dict:
    """The columns of Result.summary(), in order."""
    from numasim.compare import test_label

    sc = result.scenario
    kernel, machine = sc.get("kernel", {}), sc.get("machine", {})
    times, counters = result.times, result.counters
    row = {
        "scenario": test_label(result),
        "kernel": kernel.get("version"),
        "numa_balancing": kernel.get("numa_balancing"),
        "machine": machine.get("name") or machine.get("profile"),
        "seed": result.seed,
        "completed": result.completed,
        "elapsed_s": float(times["elapsed_s"]),
        "user_s": float(times["user_s"]),
        "system_s": float(times["system_s"]),
        "hint_local_percent": result.hint_local_percent(),
    }
    for k in SUMMARY_COUNTERS:
        row[k] = int(counters.get(k, 0))
    row["numa_pages_migrated_mib"] = pages_to_mib(row["numa_pages_migrated"])
    row["pgmigrate_success_mib"] = pages_to_mib(row["pgmigrate_success"])
    row["run_id"] = result.run_id
    return row


def load_results(path) -> pd.DataFrame:
    """Every saved result under ``path`` (a result JSON, or a directory searched recursively,
    group directories included) as one frame: a row per run, ``path`` then Result.summary()'s
    columns, in path order. Raises numasim.NumasimError (a UsageError) for a path that is no
    result, a directory without any result, or a result file that cannot be read;
    FileNotFoundError for a missing path."""
    from numasim.storage import load_result, result_files

    rows = [{"path": str(f), **summary_row(load_result(f))} for f in result_files(path)]
    return pd.DataFrame(rows)

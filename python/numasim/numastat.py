"""Per-node views of a result as numastat(8) shows them: the per-node allocation counters
(`numastat`, /sys/devices/system/node/nodeN/numastat) and each process's memory per node
(`numastat -p`)."""

from __future__ import annotations

import pandas as pd

# /sys/devices/system/node/nodeN/numastat, in numastat's order
NUMASTAT_ROWS = ["numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node"]
MIB_PAGES = 256  # 4 KiB pages per MiB
W = 16  # numastat's column width


def node_counters(result) -> pd.DataFrame | None:
    """Rows: numa_hit, numa_miss, numa_foreign, interleave_hit, local_node, other_node;
    columns: node0, node1, ... (pages). None for a result from an engine without them."""
    stat = result.raw.get("numastat")
    if not stat:
        return None
    nodes = len(next(iter(stat.values())))
    return pd.DataFrame([[int(x) for x in stat[r]] for r in NUMASTAT_ROWS],
                        index=NUMASTAT_ROWS, columns=[f"node{n}" for n in range(nodes)])


def process_memory(result) -> pd.DataFrame:
    """Each process's resident MiB per node at its last sample (for a process that exited,
    the sample before its exit): rows "PID (comm)", columns "Node 0", ..., "Total"."""
    m = result.memory
    nodes = int(result.sim.get("nr_nodes") or (m["node"].max() + 1 if len(m) else 0))
    cols = [f"Node {n}" for n in range(nodes)]
    if m.empty:
        return pd.DataFrame(columns=cols + ["Total"])
    last = m[m["time_s"] == m.groupby("pid")["time_s"].transform("max")]
    table = last.pivot_table(index="pid", columns="node", values="pages", aggfunc="sum", fill_value=0)
    table = table.reindex(columns=range(nodes), fill_value=0) / MIB_PAGES
    table.columns = cols
    table["Total"] = table.sum(axis=1)
    comm = {p.get("pid"): p.get("comm", "?") for p in result.processes}
    table.index = [f"{pid} ({comm.get(pid, '?')})" for pid in table.index]
    return table


def counters_text(df: pd.DataFrame) -> str:
    """`numastat`'s layout: a column per node, a row per counter."""
    lines = [" " * W + "".join(c.rjust(W) for c in df.columns)]
    for name, row in df.iterrows():
        lines.append(name.ljust(W) + "".join(str(int(v)).rjust(W) for v in row))
    return "\n".join(lines)


def process_memory_text(df: pd.DataFrame) -> str:
    """`numastat -p`'s layout for several processes, in MiB (numastat's "MBs")."""
    label_w = max([18] + [len(i) for i in df.index])
    rule = "-" * label_w + " " + " ".join("-" * (W - 1) for _ in df.columns)
    lines = ["Per-node process memory usage (in MBs)",
             "PID".ljust(label_w) + "".join(c.rjust(W) for c in df.columns), rule]
    for name, row in df.iterrows():
        lines.append(name.ljust(label_w) + "".join(f"{v:.2f}".rjust(W) for v in row))
    lines.append(rule)
    lines.append("Total".ljust(label_w) + "".join(f"{v:.2f}".rjust(W) for v in df.sum(axis=0)))
    return "\n".join(lines)

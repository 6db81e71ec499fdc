"""What NUMA balancing decided, from any result (realkernel/pacing.py): scan passes and counts
per pass over the same time span, and the placement of each process's worker threads."""

from __future__ import annotations

import json

from numasim import Result
from numasim.realkernel import pacing


def result(elapsed=10.0, seqs=(), tasks=(), vmstat=None, counters=None):
    """A result with series.scan_seq rows (t, pid, seq), series.tasks rows (t, tid, pid, node)
    and series.vmstat {"time_s": [...], name: [...]}."""
    raw = {
        "completed": True, "counters": counters or {}, "times": {"elapsed_s": elapsed},
        "series": {
            "scan_seq": {"time_s": [r[0] for r in seqs], "pid": [r[1] for r in seqs], "seq": [r[2] for r in seqs]},
            "tasks": {"time_s": [r[0] for r in tasks], "tid": [r[1] for r in tasks], "pid": [r[2] for r in tasks],
                      "cpu_node": [r[3] for r in tasks], "preferred_nid": [-1] * len(tasks)},
            "vmstat": vmstat or {"time_s": []},
        },
        "scenario": {}, "seed": 1,
    }
    return Result(json.dumps(raw))


def test_counts_per_pass_use_the_counts_at_the_horizon_not_the_runs_total():
    # two processes, 2 passes each by t=5; the run goes on to t=10 with twice the updates
    r = result(seqs=[(2.0, 1, 1), (4.0, 1, 2), (2.0, 2, 1), (4.5, 2, 2), (8.0, 1, 3), (8.0, 2, 3)],
               vmstat={"time_s": [1.0, 5.0, 10.0], "numa_pte_updates": [100, 4000, 8000],
                       "numa_hint_faults": [50, 2000, 4000]},
               counters={"numa_pte_updates": 8000, "numa_hint_faults": 4000})
    m = pacing.metrics(r, horizon_s=5.0)
    assert m["scan_passes"] == 2
    assert m["numa_pte_updates_per_pass"] == 4000 / 4 and m["numa_hint_faults_per_pass"] == 2000 / 4
    end = pacing.metrics(r)  # the whole run: 3 passes each, the totals
    assert end["scan_passes"] == 3 and end["numa_pte_updates_per_pass"] == 8000 / 6


def test_count_at_takes_the_last_sample_before_the_time():
    r = result(vmstat={"time_s": [1.0, 2.0, 3.0], "x": [5, 7, 9]}, counters={"x": 10})
    assert (pacing.count_at(r, "x", 0.5), pacing.count_at(r, "x", 2.5), pacing.count_at(r, "x", 3.0)) == (0, 7, 10)
    assert pacing.count_at(r, "unsampled", 1.0) == 0 and pacing.count_at(r, "x", None) == 10


def test_placement_kinds_and_when_the_processes_separated():
    # pids 10 and 20, two workers each (the main threads 10 and 20 are left out)
    rows = [(1.0, 11, 10, 0), (1.0, 12, 10, 1), (1.0, 21, 20, 1), (1.0, 22, 20, 0), (1.0, 10, 10, 1),
            (3.0, 12, 10, 0), (3.0, 22, 20, 1)]
    p = pacing.placement(result(tasks=rows))
    assert p == {"initial": pacing.SPLIT, "final": pacing.SEPARATED, "separated_s": 3.0}
    assert pacing.placement_kind({10: (0, 0), 20: (0, 0)}) == pacing.TOGETHER


def test_fork_placement_comes_from_the_wakeup_new_events():
    # a real kernel's sched_wakeup_new names the thread; its process comes from series.tasks
    r = result(tasks=[(1.0, 11, 10, 0), (1.0, 12, 10, 0), (1.0, 21, 20, 1), (1.0, 22, 20, 0)])
    r.raw["numa_events"] = [{"event": "wakeup_new", "pid": tid, "dst_nid": n} for tid, n in
                            ((20, 1), (11, 0), (12, 0), (21, 1), (22, 1))]
    assert pacing.fork_nodes(r) == {10: (0, 0), 20: (1, 1)}
    m = pacing.metrics(r)
    assert m["placement_fork"] == pacing.SEPARATED and m["placement_initial"] == pacing.SPLIT


def test_pages_migrated_by_the_threads_of_each_node():
    r = result()
    r.raw["tasks"] = [{"pid": 10, "tgid": 10, "node": 0, "numa_pages_migrated": 5},  # main thread: not a worker
                      {"pid": 11, "tgid": 10, "node": 0, "numa_pages_migrated": 7},
                      {"pid": 12, "tgid": 10, "node": 1, "numa_pages_migrated": 30},
                      {"pid": 13, "tgid": 10, "node": 1, "numa_pages_migrated": 2}]
    assert pacing.migrated_by_thread_node(r) == {0: 7, 1: 32}
    m = pacing.metrics(r)
    assert (m["numa_pages_migrated_by_node0_threads"], m["numa_pages_migrated_by_node1_threads"]) == (7, 32)


def test_one_process_worker_placement_and_its_cross_node_moves():
    # one process (pid 10), three workers; worker 12 is moved to node 1 at 4.2 s (a
    # sched_migrate_task across nodes), 11 moves inside node 0 (not counted), main thread left out
    rows = [(1.0, 11, 10, 0), (1.0, 12, 10, 0), (1.0, 13, 10, 0), (1.0, 10, 10, 0), (4.5, 12, 10, 1)]
    r = result(tasks=rows)
    r.raw["numa_events"] = [{"event": "migrate_task", "pid": 11, "src_nid": 0, "dst_nid": 0, "t": 0.5},
                            {"event": "migrate_task", "pid": 12, "src_nid": 0, "dst_nid": 1, "t": 4.2},
                            {"event": "migrate_task", "pid": 10, "src_nid": 0, "dst_nid": 1, "t": 6.0}]
    m = pacing.metrics(r)
    assert m["placement_workers_final"] == "0:2 1:1"
    assert (m["cross_node_moves"], m["first_cross_node_move_s"]) == (1, 4.2)
    assert "placement_final" not in m  # the two-process placement kinds need two processes


def test_worker_placement_is_checked_only_where_a_worker_changed_node():
    from numasim.realkernel import compare

    def run(moved_to):
        rows = [(1.0, 11, 10, 0), (1.0, 12, 10, 0), (1.0, 13, 10, 0), (4.5, 12, 10, moved_to)]
        r = result(tasks=rows)
        r.raw["numa_events"] = [{"event": "migrate_task", "pid": 12, "src_nid": 0, "dst_nid": 1, "t": 4.2}] if moved_to else []
        return r

    rows = {x["metric"]: x for x in compare.compare(run(0), run(1))["rows"]}
    assert rows["placement_workers_final"]["checked"] and rows["placement_workers_final"]["ok"] is False
    pinned = {x["metric"]: x for x in compare.compare(run(0), run(0))["rows"]}
    assert not pinned["placement_workers_final"]["checked"]  # affinity decided it, not the scheduler

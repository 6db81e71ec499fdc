//! Tests of task_numa_migrate's variants and of migrate_degrades_locality against the kernel.

use crate::kernel::Kernel;
use crate::sched::balance::{CpuIdle, LbEnv};
use crate::sched::balance_locality::Locality;
use crate::sched::task::TaskState;
use crate::sched::tests_balance::set_faults;
use crate::sched::tests_placement::forking;

/// The VM shape (2 nodes x 2 CPUs) with one process's threads on `layout`'s CPUs.
fn vm(version: &str, extra: &str, layout: &[usize]) -> (Kernel, Vec<usize>) {
    let (mut k, main, children) = forking(version, extra, 2, layout.len(), true);
    k.cpus[0].rq.clear();
    k.tasks[main].state = TaskState::Sleeping;
    for (&t, &cpu) in children.iter().zip(layout) {
        (k.tasks[t].state, k.tasks[t].cpu) = (TaskState::Runnable, cpu);
        k.cpus[cpu].rq.push(t);
    }
    (k, children)
}

/// Where task_numa_migrate sends `p`: (its CPU, the task it swaps with).
fn decide(k: &mut Kernel, p: usize) -> Option<(usize, Option<usize>)> {
    k.task_numa_migrate(p);
    k.numa_moves.pop().map(|m| (m.dst_cpu, m.swap))
}

/// 13ede3315087 (6.0): two groupless tasks on each other's preferred node, the destination
/// with spare capacity (one idle CPU): 5.7-5.19 swap them, 6.0 does not (the load balancer
/// would undo it).
#[test]
fn no_swap_into_spare_capacity_from_6_0() {
    for (version, swaps) in [("5.12", true), ("6.1", false)] {
        // node 0: p and x; node 1: q (CPU 3 idle)
        let (mut k, t) = vm(version, "", &[0, 1, 2]);
        let (p, x, q) = (t[0], t[1], t[2]);
        set_faults(&mut k, p, [0, 100]);
        set_faults(&mut k, q, [100, 0]);
        set_faults(&mut k, x, [50, 50]);
        (k.tasks[p].numa.preferred_nid, k.tasks[q].numa.preferred_nid) = (Some(1), Some(0));
        assert_eq!(decide(&mut k, p) == Some((2, Some(q))), swaps, "{version}");
    }
}

/// kernel/sched/fair.c: task_numa_find_cpu with spare capacity — a task alone on node 0 whose
/// preferred node 1 runs one task: 5.7's adjust_numa_imbalance (fb86f5b21192) ignores the
/// imbalance while the source runs <= 2 tasks and moves it to node 1's idle CPU; 5.11's looks at
/// the destination (2 running >= a quarter of 2 CPUs) and refuses.
#[test]
fn spare_capacity_move_by_adjust_variant() {
    for (extra, moves) in [("[kernel.variants]\nadjust_numa_imbalance = \"5.7\"", true), ("", false)] {
        let (mut k, t) = vm("5.12", extra, &[0, 2]);
        let (p, q) = (t[0], t[1]);
        set_faults(&mut k, p, [0, 100]);
        set_faults(&mut k, q, [0, 100]);
        k.tasks[p].numa.preferred_nid = Some(1);
        assert_eq!(decide(&mut k, p) == Some((3, None)), moves, "{extra}");
    }
}

/// kernel/sched/fair.c (<= 4.18): task_numa_compare — "balance doesn't matter much if we're
/// running a task per cpu": a swap for an improvement of 20; 4.19+ wants SMALLIMP (30).
#[test]
fn small_improvement_swaps_only_before_4_19() {
    for (version, swaps) in [("4.9", true), ("6.1", false)] {
        let (mut k, t) = vm(version, "", &[0, 1, 2, 3]);
        set_faults(&mut k, t[0], [49, 51]);
        for &x in &t[1..] {
            set_faults(&mut k, x, [50, 50]);
        }
        k.tasks[t[0]].numa.preferred_nid = Some(1);
        assert_eq!(decide(&mut k, t[0]) == Some((2, Some(t[2]))), swaps, "{version}");
    }
}

/// kernel/sched/fair.c: migrate_degrades_locality per release, for a task with equal weights on
/// both nodes (and no preferred-node rule): 4.19-6.13 return 0 ("improves": go even if cache
/// hot), 6.14 returns 0 as the neutral value (c3856c9ce6b8: task_hot decides); an idle CPU
/// balancing ignores locality from 4.13 (739294fb03f5), not in 4.9; 4.9 compares raw faults.
#[test]
fn migrate_degrades_locality_by_release() {
    let env = |k: &Kernel, idle| LbEnv::for_test(k, 2, 0, idle);
    for (version, equal, fewer_when_idle, fewer_busy) in [
        ("4.9", Locality::Improves, Locality::Degrades, Locality::Degrades),
        ("6.12", Locality::Improves, Locality::Neutral, Locality::Degrades),
        ("6.14", Locality::Neutral, Locality::Neutral, Locality::Degrades),
    ] {
        let (mut k, t) = vm(version, "", &[0]);
        set_faults(&mut k, t[0], [50, 50]);
        assert_eq!(k.migrate_degrades_locality(t[0], &env(&k, CpuIdle::NotIdle)), equal, "{version}");
        set_faults(&mut k, t[0], [60, 40]);
        assert_eq!(k.migrate_degrades_locality(t[0], &env(&k, CpuIdle::Idle)), fewer_when_idle, "{version}");
        assert_eq!(k.migrate_degrades_locality(t[0], &env(&k, CpuIdle::NotIdle)), fewer_busy, "{version}");
        k.tasks[t[0]].numa.preferred_nid = Some(1);
        assert_eq!(k.migrate_degrades_locality(t[0], &env(&k, CpuIdle::NotIdle)), Locality::Improves, "{version}: to the preferred node");
    }
}

//! Tests of the NUMA-level load balancer against the kernel's rules.

use super::balance::CpuIdle;
use super::tests_placement::forking;
use crate::kernel::Kernel;
use crate::sched::task::TaskState;

/// 2 nodes x `cpus` CPUs with `n` threads of one process queued as `layout` says (thread i on
/// CPU layout[i]), the main thread asleep.
fn placed(version: &str, extra: &str, cpus: usize, layout: &[usize], balancing: bool) -> (Kernel, Vec<usize>) {
    let (mut k, main, children) = forking(version, extra, cpus, layout.len(), balancing);
    k.cpus[0].rq.clear();
    k.tasks[main].state = TaskState::Sleeping;
    k.exec_start.resize(k.tasks.len(), 0);
    for (&t, &cpu) in children.iter().zip(layout) {
        (k.tasks[t].state, k.tasks[t].cpu) = (TaskState::Runnable, cpu);
        k.cpus[cpu].rq.push(t);
    }
    (k, children)
}

/// Per call of sched_balance_rq from `dst` (an idle CPU of node 1), the tasks node 1 has after it.
fn balance_runs(k: &mut Kernel, dst: usize, calls: usize) -> Vec<usize> {
    (0..calls)
        .map(|_| {
            k.sched_balance_rq(dst, 0, CpuIdle::Idle);
            k.node_running(1)
        })
        .collect()
}

/// kernel/sched/fair.c: need_active_balance — 8 running tasks on node 0, none on node 1: none
/// is detachable (each runs alone), so each balance fails; after more than cache_nice_tries + 2
/// = 4 failures the stopper pushes one over. 5.13+ (91771246031b) keeps counting: the next
/// balance pushes again. Before, kicking it reset the count to cache_nice_tries + 1, so one
/// push every second balance. 6.6's sibling_imbalance stops at 4/4, as the 5.12 code does.
#[test]
fn running_tasks_move_by_active_balancing() {
    for (version, expect) in [("6.12", vec![0, 0, 0, 0, 1, 2, 3, 4, 4, 4]), ("5.12", vec![0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4])] {
        let (mut k, _) = placed(version, "", 8, &[0, 1, 2, 3, 4, 5, 6, 7], false);
        assert_eq!(balance_runs(&mut k, 8, expect.len()), expect, "{version}");
    }
}

/// kernel/sched/fair.c: can_migrate_task, migrate_degrades_locality — an idle CPU of node 1
/// pulls from an overloaded node 0 whose queued tasks prefer node 0 while a task there does
/// not (so leaving degrades their locality): 4.19+ refuses them until nr_balance_failed >
/// cache_nice_tries (2), so they move at the 4th balance; 3.x (NUMA_RESIST_LOWER off, the task
/// cache cold) takes them at once.
#[test]
fn preferred_node_gives_way_after_cache_nice_tries() {
    for (version, expect) in [("6.12", vec![0, 0, 0, 2]), ("6.14", vec![0, 0, 0, 2]), ("3.19", vec![2, 2, 2, 2])] {
        // CPU 0: t0 (running) t1 t2 u; CPU 1: t3
        let (mut k, t) = placed(version, "", 2, &[0, 0, 0, 0, 1], true);
        for (i, &x) in t.iter().enumerate() {
            let pref = if i == 3 { 1 } else { 0 };
            set_faults(&mut k, x, if pref == 0 { [100, 0] } else { [0, 100] });
            k.tasks[x].numa.preferred_nid = Some(pref);
        }
        // u prefers node 1 but may not run there
        k.tasks[t[3]].allowed = vec![true, true, false, false];
        assert_eq!(balance_runs(&mut k, 2, 4), expect, "{version}");
    }
}

/// Give task `t` private memory faults per node (no group).
pub fn set_faults(k: &mut Kernel, t: usize, per_node: [i64; 2]) {
    use crate::sched::numa::fault::{task_faults_idx, NUMA_MEM};
    let mut f = vec![0; 16];
    for (nid, &n) in per_node.iter().enumerate() {
        f[task_faults_idx(2, NUMA_MEM, nid, 1)] = n;
    }
    (k.tasks[t].numa.faults, k.tasks[t].numa.total_faults) = (f, per_node.iter().sum());
}

/// kernel/sched/fair.c: calculate_imbalance with spare capacity — node 0 runs a pair of tasks on
/// one CPU, node 1 is idle: before 5.6 the balancer splits them; b396f52326de (5.6), 5.7's
/// adjust_numa_imbalance (fb86f5b21192) and 6.0's (cb29a5c19d2d) leave a pair alone. Three
/// tasks: 6.0 adjusts the whole difference (3 > NUMA_IMBALANCE_MIN) then halves it, and moves
/// one; 5.18 halves first (1 <= 2, node 1 within imb_numa_nr) and leaves them.
#[test]
fn numa_imbalance_allowance_by_release() {
    let pair = [("4.9", ""), ("5.12", "[kernel.variants]\nadjust_numa_imbalance = \"5.6\""), ("5.12", "[kernel.variants]\nadjust_numa_imbalance = \"5.7\""), ("6.1", "")];
    for (i, (version, extra)) in pair.into_iter().enumerate() {
        let (mut k, _) = placed(version, extra, 8, &[0, 0], false);
        let moved = if i == 0 { 1 } else { 0 };
        assert_eq!(balance_runs(&mut k, 8, 1), vec![moved], "pair, {version} {extra}");
    }
    let v518 = "[kernel.variants]\nadjust_numa_imbalance = \"5.18\"\nimb_numa_nr = \"5.18\"";
    for (extra, moved) in [("", 1), (v518, 0)] {
        let (mut k, _) = placed("6.1", extra, 8, &[0, 0, 0], false);
        assert_eq!(balance_runs(&mut k, 8, 1), vec![moved], "three, {extra}");
    }
}

/// kernel/sched/fair.c: get_sd_balance_interval — the NUMA domain of 128 CPUs balances every
/// 128 ms from an idle CPU; a busy one waits busy_factor times longer, less a jiffy: 32 before
/// 5.10, 16 after.
#[test]
fn balance_interval_by_busy_factor() {
    for (version, busy_jiffies) in [("4.9", 128 * 32 / 4 - 1), ("6.12", 128 * 16 / 4 - 1)] {
        let text = crate::testutil::SMALL.replace("cpus_per_node = 2", "cpus_per_node = 64");
        let s = crate::scenario::parse_scenario(&format!("[kernel]\nversion = \"{version}\"\n{text}")).unwrap();
        let k = crate::simulation::Simulation::new(&s).unwrap().k;
        let level = k.sched_domains.numa[0][0].level;
        assert_eq!(k.sd_balance_interval_for_test(128, level, false), 32 * k.tick_ns, "{version}");
        assert_eq!(k.sd_balance_interval_for_test(128, level, true), busy_jiffies * k.tick_ns, "{version}");
    }
}

/// kernel/sched/fair.c: sibling_imbalance (7ff1693236f5, 6.6) — a busy CPU of a node running
/// one task no longer pulls from a node running four (three stacked on one CPU): the task-count
/// difference counts only for an idle destination. Before 6.6 prefer_sibling forces the pull.
#[test]
fn busy_cpu_pulls_by_task_counts_only_before_6_6() {
    for (version, pulled) in [("6.1", true), ("6.6", false)] {
        let (mut k, _) = placed(version, "", 8, &[0, 0, 0, 1, 8], false);
        k.sched_balance_rq(8, 0, CpuIdle::NotIdle);
        assert_eq!(k.node_running(1) == 2, pulled, "{version}");
    }
}

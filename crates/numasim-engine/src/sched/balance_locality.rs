//! Whether the load balancer may take a task: affinity, the running task, cache hotness and
//! NUMA locality, by release (kernel/sched/fair.c: can_migrate_task, task_hot,
//! migrate_degrades_locality, migrate_improves_locality).
//!
//! task_hot: the engine's tasks run whole ticks and the balancer runs at a tick's end, so a
//! queued task is cache hot (it ran within sysctl_sched_migration_cost, 0.5 ms) exactly when it
//! ran in the tick just ended; any other last ran a tick (>= 1 ms) or more ago.

use super::balance::{CpuIdle, LbEnv};
use crate::kernel::Kernel;
use crate::variants::MigrateDegradesLocality as M;

/// sysctl_sched_migration_cost, ns.
pub const SCHED_MIGRATION_COST: u64 = 500_000;

/// What moving a task does to its NUMA locality (migrate_degrades_locality's -1 / 0 / 1; 6.14's
/// zero / negative / positive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locality {
    /// No opinion: task_hot decides.
    Neutral,
    Improves,
    Degrades,
}

impl Kernel {
    /// Faults of task `t` (or of its group) on `nid`: task_faults / group_faults.
    fn lb_faults(&self, t: usize, nid: usize, group: bool) -> i64 {
        self.node_faults(t, nid, !group)
    }

    /// Whether moving `p` from env.src_cpu to env.dst_cpu helps or hurts its locality.
    // kernel/sched/fair.c: migrate_degrades_locality
    pub fn migrate_degrades_locality(&self, p: usize, env: &LbEnv) -> Locality {
        let v = self.variants().migrate_degrades_locality;
        let t = &self.tasks[p];
        if !self.numa_balancing() || t.numa.faults.is_empty() {
            return Locality::Neutral;
        }
        let (src_nid, dst_nid) = (self.cpu_node(env.src_cpu), self.cpu_node(env.dst_cpu));
        if src_nid == dst_nid || v == M::Base {
            return Locality::Neutral;
        }
        let pref = t.numa.preferred_nid;
        if pref == Some(src_nid) {
            // migrating away from the preferred node is bad, unless others there are misplaced
            let (_, preferred) = self.rq_numa_counts(env.src_cpu);
            return if self.nr_running(env.src_cpu) > preferred { Locality::Degrades } else { Locality::Neutral };
        }
        if pref == Some(dst_nid) {
            return Locality::Improves;
        }
        // 739294fb03f5: leaving a core idle is often worse than degrading locality
        if v >= M::V4_13 && env.idle == CpuIdle::Idle {
            return Locality::Neutral;
        }
        let group = t.numa.group.is_some();
        let (src, dst) = if v >= M::V4_19 {
            let dist = self.topo.node_distance(src_nid, dst_nid);
            if group {
                (self.group_weight(p, src_nid, dist), self.group_weight(p, dst_nid, dist))
            } else {
                (self.task_weight(p, src_nid, dist), self.task_weight(p, dst_nid, dist))
            }
        } else {
            (self.lb_faults(p, src_nid, group), self.lb_faults(p, dst_nid, group))
        };
        match v {
            // c3856c9ce6b8: src_weight - dst_weight
            M::V6_14 if src == dst => Locality::Neutral,
            _ if dst < src => Locality::Degrades,
            _ => Locality::Improves,
        }
    }

    /// 3.x: the destination holds more of the task's (group's) faults, or is its preferred node.
    // kernel/sched/fair.c (<= 4.1): migrate_improves_locality (NUMA_FAVOUR_HIGHER)
    fn migrate_improves_locality(&self, p: usize, env: &LbEnv) -> bool {
        let t = &self.tasks[p];
        if t.numa.faults.is_empty() {
            return false;
        }
        let (src_nid, dst_nid) = (self.cpu_node(env.src_cpu), self.cpu_node(env.dst_cpu));
        if src_nid == dst_nid {
            return false;
        }
        if let Some(g) = t.numa.group {
            // the group's active nodes (the 4.x fraction rule for 3.19's hysteresis mask)
            let ng = &self.numa_groups[g];
            let nr = self.topo.nr_nodes;
            if ng.is_active(nr, src_nid) {
                return false;
            }
            if ng.is_active(nr, dst_nid) {
                return true;
            }
            return self.lb_faults(p, dst_nid, true) > self.lb_faults(p, src_nid, true);
        }
        if t.numa.preferred_nid == Some(dst_nid) {
            return true;
        }
        self.lb_faults(p, dst_nid, false) > self.lb_faults(p, src_nid, false)
    }

    /// Whether `p` ran within sysctl_sched_migration_cost of the balance (it is not a NUMA
    /// level's SMT domain; no next buddy, no core scheduling).
    // kernel/sched/fair.c: task_hot
    pub fn task_hot(&self, p: usize, env: &LbEnv) -> bool {
        let exec_start = self.exec_start.get(p).copied().unwrap_or(0);
        env.now.saturating_sub(exec_start) < SCHED_MIGRATION_COST
    }

    // kernel/sched/fair.c: can_migrate_task
    pub fn can_migrate_task(&self, p: usize, env: &mut LbEnv) -> bool {
        self.can_migrate_task_on(p, env, true)
    }

    /// can_migrate_task; `running_check` false in the stopper (the task is not running then).
    pub fn can_migrate_task_on(&self, p: usize, env: &mut LbEnv, running_check: bool) -> bool {
        if !self.tasks[p].allowed[env.dst_cpu] {
            return false; // LBF_SOME_PINNED
        }
        env.set_some_allowed();
        if running_check && self.cpus[env.src_cpu].curr() == Some(p) {
            return false; // task_on_cpu
        }
        if env.active_lb {
            return true; // 91771246031b
        }
        let too_many_failures = env.nr_balance_failed > env.cache_nice_tries;
        if self.variants().migrate_degrades_locality == M::Base {
            // "Aggressive migration if: destination numa is preferred, the task is cache
            // cold, or too many balance attempts have failed" (NUMA_RESIST_LOWER off)
            return self.migrate_improves_locality(p, env) || !self.task_hot(p, env) || too_many_failures;
        }
        let hot = match self.migrate_degrades_locality(p, env) {
            Locality::Neutral => self.task_hot(p, env),
            Locality::Degrades => true,
            Locality::Improves => false,
        };
        !hot || too_many_failures
    }
}

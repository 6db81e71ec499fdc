//! What task_numa_migrate knows of a node, and its load tests, by release (kernel/sched/fair.c:
//! update_numa_stats, numa_classify, load_too_imbalanced, numa_has_capacity), from running
//! counts (sched/domain.rs: no PELT; every task weighs NICE_0_LOAD).

use crate::kernel::Kernel;
use crate::sched::domain::{NICE_0_LOAD, SCHED_CAPACITY_SCALE};
use crate::variants::TaskNumaCompare as C;

/// enum numa_type (5.7+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    HasSpare,
    FullyBusy,
    Overloaded,
}

/// struct numa_stats.
#[derive(Debug, Clone, Copy)]
pub struct NodeStats {
    pub nr_running: i64,
    pub load: i64,
    pub util: i64,
    pub runnable: i64,
    pub compute_capacity: i64,
    pub weight: i64,
    /// <= 4.18: tasks the node can run (its cores: SMT siblings had smt_gain / 2 capacity).
    pub task_capacity: i64,
    pub has_free_capacity: bool,
    pub node_type: NodeType,
    pub idle_cpu: Option<usize>,
}

impl Kernel {
    /// rq->numa_migrate_on, and the engine's stand-in for a NUMA move decided this tick that
    /// the kernel would already have made (stop_one_cpu waits for it): a CPU that a queued move
    /// or swap involves.
    pub fn numa_migrate_on(&self, cpu: usize) -> bool {
        self.numa_moves.iter().any(|m| m.dst_cpu == cpu || m.src_cpu == cpu)
    }

    /// Node `nid`'s numbers for moving task `p`; `find_idle` also caches an idle CPU (5.7+:
    /// the first one, or the first of an idle core, not reserved, allowed for `p`).
    // kernel/sched/fair.c: update_numa_stats
    pub fn update_numa_stats(&self, p: usize, nid: usize, pct: i64, find_idle: bool) -> NodeStats {
        let v = self.variants().task_numa_compare;
        let cpus = &self.topo.node_cpus[nid];
        let mut ns = NodeStats {
            nr_running: 0,
            load: 0,
            util: 0,
            runnable: 0,
            compute_capacity: 0,
            weight: cpus.len() as i64,
            task_capacity: 0,
            has_free_capacity: false,
            node_type: NodeType::HasSpare,
            idle_cpu: None,
        };
        let mut idle_core = None;
        for &cpu in cpus {
            // <= 4.18: rq->nr_running; 5.7+: cfs.h_nr_running (h_nr_runnable from 6.14)
            ns.nr_running += if v < C::V5_7 { self.nr_running(cpu) } else { self.numa_nr_running(cpu) } as i64;
            ns.load += self.cpu_load(cpu) as i64;
            ns.util += self.cpu_util(cpu) as i64;
            ns.runnable += self.cpu_runnable(cpu) as i64;
            ns.compute_capacity += SCHED_CAPACITY_SCALE as i64;
            if find_idle && v >= C::V5_7 && self.idle(cpu) {
                if self.numa_migrate_on(cpu) || !self.tasks[p].allowed[cpu] {
                    continue;
                }
                ns.idle_cpu.get_or_insert(cpu);
                // numa_idle_core (feaed76376fd in 6.3 stops looking once found: same result)
                if self.topo.smt > 1 && idle_core.is_none() && self.core_idle(cpu) {
                    idle_core = Some(cpu);
                }
            }
        }
        if v < C::V4_19 {
            let cores = if self.topo.smt > 1 { cpus.iter().filter(|&&c| self.topo.siblings(c).all(|s| s > c)).count() } else { cpus.len() };
            ns.task_capacity = cores.max(1) as i64;
            ns.has_free_capacity = ns.nr_running < ns.task_capacity;
        }
        ns.node_type = numa_classify(pct, &ns);
        if idle_core.is_some() {
            ns.idle_cpu = idle_core;
        }
        ns
    }
}

/// has spare capacity / fully busy / overloaded, as group_classify but per node.
// kernel/sched/fair.c: numa_classify (5.7+)
pub fn numa_classify(pct: i64, ns: &NodeStats) -> NodeType {
    let cap = ns.compute_capacity;
    if ns.nr_running > ns.weight && (cap * 100 < ns.util * pct || cap * pct < ns.runnable * 100) {
        return NodeType::Overloaded;
    }
    if ns.nr_running < ns.weight || (cap * 100 > ns.util * pct && cap * pct > ns.runnable * 100) {
        return NodeType::HasSpare;
    }
    NodeType::FullyBusy
}

/// Whether loads `src_load`/`dst_load` are worse balanced than the nodes are now.
/// <= 4.18: only beyond imbalance_pct, whichever way (the slope, not the direction);
/// 4.19+: any growth of the capacity-corrected difference.
// kernel/sched/fair.c: load_too_imbalanced
pub fn load_too_imbalanced(v: C, src: &NodeStats, dst: &NodeStats, pct: i64, src_load: i64, dst_load: i64) -> bool {
    let (sc, dc) = (src.compute_capacity, dst.compute_capacity);
    if v < C::V4_19 {
        let (lo, hi) = if dst_load < src_load { (dst_load, src_load) } else { (src_load, dst_load) };
        let imb = hi * sc * 100 - lo * dc * pct;
        if imb <= 0 {
            return false;
        }
        let (olo, ohi) = if dst.load < src.load { (dst.load, src.load) } else { (src.load, dst.load) };
        let old_imb = ohi * sc * 100 - olo * dc * pct;
        return imb > old_imb;
    }
    let imb = (dst_load * sc - src_load * dc).abs();
    let old_imb = (dst.load * sc - src.load * dc).abs();
    imb > old_imb
}

/// 4.1-4.18: a node is tried only if the source is busier (by imbalance_pct) and, when the
/// source has free capacity, the destination has some too.
// kernel/sched/fair.c: numa_has_capacity
pub fn numa_has_capacity(src: &NodeStats, dst: &NodeStats, pct: i64) -> bool {
    if src.has_free_capacity && !dst.has_free_capacity {
        return false;
    }
    src.load * dst.compute_capacity * pct > dst.load * src.compute_capacity * 100
}

/// task_h_load of any task: every task weighs the same in the engine.
pub const TASK_LOAD: i64 = NICE_0_LOAD as i64;

#[cfg(test)]
mod tests {
    use super::*;

    fn node(nr: i64, cpus: i64) -> NodeStats {
        NodeStats {
            nr_running: nr,
            load: nr * 1024,
            util: 1024 * nr.min(cpus),
            runnable: 1024 * nr,
            compute_capacity: 1024 * cpus,
            weight: cpus,
            task_capacity: cpus,
            has_free_capacity: nr < cpus,
            node_type: NodeType::HasSpare,
            idle_cpu: None,
        }
    }

    /// kernel/sched/fair.c: load_too_imbalanced — 4.19+ refuses any move that widens the
    /// difference (5 vs 3 -> 6 vs 2); <= 4.18 tolerates it while within imbalance_pct 112 of
    /// the larger side, and compares only beyond that.
    #[test]
    fn load_too_imbalanced_by_release() {
        let (src, dst) = (node(4, 4), node(4, 4));
        // a swap-free move 4:4 -> 3:5
        assert!(load_too_imbalanced(C::V4_19, &src, &dst, 112, 3 * 1024, 5 * 1024));
        assert!(load_too_imbalanced(C::Base, &src, &dst, 112, 3 * 1024, 5 * 1024), "5*100 > 3*112: beyond the threshold, and worse");
        let (src, dst) = (node(9, 10), node(8, 10));
        // 9:8 -> 8:9: same difference, other way round
        assert!(!load_too_imbalanced(C::V4_19, &src, &dst, 108, 8 * 1024, 9 * 1024));
        assert!(!load_too_imbalanced(C::Base, &src, &dst, 112, 8 * 1024, 9 * 1024), "9*100 <= 8*112");
    }

    /// kernel/sched/fair.c: numa_classify — the has_spare/fully_busy/overloaded types of 5.7.
    #[test]
    fn numa_classify_types() {
        assert_eq!(numa_classify(108, &node(3, 4)), NodeType::HasSpare);
        assert_eq!(numa_classify(108, &node(4, 4)), NodeType::FullyBusy);
        assert_eq!(numa_classify(108, &node(5, 4)), NodeType::Overloaded);
    }

    /// 4.1 numa_has_capacity: only toward a node not busier than the source by more than
    /// imbalance_pct, and not from free capacity into none.
    #[test]
    fn numa_has_capacity_needs_a_less_loaded_destination() {
        assert!(numa_has_capacity(&node(4, 4), &node(2, 4), 112));
        assert!(numa_has_capacity(&node(4, 4), &node(4, 4), 112), "4 * 112 > 4 * 100");
        assert!(!numa_has_capacity(&node(2, 4), &node(4, 4), 112), "the destination is busier");
        assert!(!numa_has_capacity(&node(3, 4), &node(4, 4), 200), "free capacity into none");
    }
}

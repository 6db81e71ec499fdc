//! Sched-group statistics and classification shared by fork placement and the load balancer
//! (kernel/sched/fair.c: struct sg_lb_stats, group_classify, update_sg_wakeup_stats,
//! update_sg_lb_stats), from running counts (sched/domain.rs: no PELT).

use super::domain::SCHED_CAPACITY_SCALE;
use crate::kernel::Kernel;

/// enum group_type, in the kernel's order (a higher type is busier). The engine has no
/// misfit, asymmetric-packing or pinned-imbalance groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupType {
    HasSpare,
    FullyBusy,
    Overloaded,
}

/// struct sg_lb_stats (the fields the engine uses).
#[derive(Debug, Clone, Copy)]
pub struct SgStats {
    pub avg_load: u64,
    pub group_load: u64,
    pub group_capacity: u64,
    pub group_util: u64,
    pub group_runnable: u64,
    pub sum_nr_running: usize,
    pub sum_h_nr_running: usize,
    pub idle_cpus: usize,
    pub group_weight: usize,
    pub group_type: GroupType,
    pub nr_numa_running: usize,
    pub nr_preferred_running: usize,
    /// SMT cores in the group (sg->cores, 6.6 sibling_imbalance).
    pub cores: usize,
}

impl SgStats {
    pub fn empty() -> Self {
        SgStats {
            avg_load: 0,
            group_load: 0,
            group_capacity: 0,
            group_util: 0,
            group_runnable: 0,
            sum_nr_running: 0,
            sum_h_nr_running: 0,
            idle_cpus: 0,
            group_weight: 0,
            group_type: GroupType::HasSpare,
            nr_numa_running: 0,
            nr_preferred_running: 0,
            cores: 0,
        }
    }

    /// group_is_overloaded: more tasks than CPUs and the CPUs are (nearly) saturated.
    // kernel/sched/fair.c: group_is_overloaded
    fn is_overloaded(&self, pct: u64) -> bool {
        if self.sum_nr_running <= self.group_weight {
            return false;
        }
        self.group_capacity * 100 < self.group_util * pct || self.group_capacity * pct < self.group_runnable * 100
    }

    // kernel/sched/fair.c: group_has_capacity
    fn has_capacity(&self, pct: u64) -> bool {
        if self.sum_nr_running < self.group_weight {
            return true;
        }
        if self.group_capacity * pct < self.group_runnable * 100 {
            return false;
        }
        self.group_capacity * 100 > self.group_util * pct
    }

    /// group_classify with the domain's imbalance_pct.
    // kernel/sched/fair.c: group_classify
    pub fn classify(&mut self, pct: u64) {
        self.group_type = if self.is_overloaded(pct) {
            GroupType::Overloaded
        } else if !self.has_capacity(pct) {
            GroupType::FullyBusy
        } else {
            GroupType::HasSpare
        };
    }
}

impl Kernel {
    /// Sum the statistics of the CPUs `cpus`; `without` = (task, its CPU) is left out, as
    /// cpu_load_without & co. do for an exec'ing task. `all` counts every CPU (the wake-up
    /// path); otherwise idle CPUs add to idle_cpus only.
    fn sum_group(&self, cpus: &[usize], without: Option<(usize, usize)>) -> SgStats {
        let mut s = SgStats::empty();
        for &i in cpus {
            let local = without.is_some_and(|(_, c)| c == i) as usize;
            let nr = self.nr_running(i) - local;
            let h_nr = self.cpus[i].rq.len() - local;
            s.group_load += super::domain::NICE_0_LOAD * nr as u64;
            s.group_runnable += SCHED_CAPACITY_SCALE * nr as u64;
            s.group_util += if h_nr > 0 { SCHED_CAPACITY_SCALE } else { 0 };
            s.group_capacity += SCHED_CAPACITY_SCALE;
            s.sum_nr_running += nr;
            s.sum_h_nr_running += h_nr;
            if nr == 0 {
                s.idle_cpus += 1;
            }
        }
        s.group_weight = cpus.len();
        s
    }

    /// Statistics of a group for placing task `p` (not counted where it runs, if `without`).
    // kernel/sched/fair.c: update_sg_wakeup_stats
    pub fn update_sg_wakeup_stats(&self, cpus: &[usize], pct: u64, without: Option<(usize, usize)>) -> SgStats {
        let mut s = self.sum_group(cpus, without);
        s.classify(pct);
        if matches!(s.group_type, GroupType::FullyBusy | GroupType::Overloaded) {
            s.avg_load = s.group_load * SCHED_CAPACITY_SCALE / s.group_capacity;
        }
        s
    }

    /// Statistics of a group for the load balancer, with the NUMA counts of its runqueues.
    // kernel/sched/fair.c: update_sg_lb_stats
    pub fn update_sg_lb_stats(&self, cpus: &[usize], pct: u64) -> SgStats {
        let mut s = self.sum_group(cpus, None);
        for &i in cpus {
            let (numa, pref) = self.rq_numa_counts(i);
            s.nr_numa_running += numa;
            s.nr_preferred_running += pref;
        }
        s.cores = if self.topo.smt > 1 { cpus.iter().filter(|&&c| self.topo.siblings(c).all(|s| s > c)).count() } else { cpus.len() };
        s.classify(pct);
        if s.group_type == GroupType::Overloaded {
            s.avg_load = s.group_load * SCHED_CAPACITY_SCALE / s.group_capacity;
        }
        s
    }

    /// rq->nr_numa_running and rq->nr_preferred_running: tasks with a preferred node, and
    /// those running on it.
    // kernel/sched/fair.c: account_numa_enqueue
    pub fn rq_numa_counts(&self, cpu: usize) -> (usize, usize) {
        let node = self.cpu_node(cpu);
        let tasks = self.cpus[cpu].rq.iter().copied().chain(self.cpus[cpu].delayed.iter().map(|&(t, _)| t));
        tasks.fold((0, 0), |(n, p), t| {
            let pref = self.tasks[t].numa.preferred_nid;
            (n + pref.is_some() as usize, p + (pref == Some(node)) as usize)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(nr: usize, weight: usize, busy: usize) -> SgStats {
        let mut s = SgStats::empty();
        s.sum_nr_running = nr;
        s.group_weight = weight;
        s.group_capacity = 1024 * weight as u64;
        s.group_util = 1024 * busy as u64;
        s.group_runnable = 1024 * nr as u64;
        s
    }

    /// kernel/sched/fair.c: group_classify — fewer tasks than CPUs has spare capacity; one
    /// task per CPU is fully busy (util * 117 > capacity * 100); more tasks than CPUs on busy
    /// CPUs is overloaded.
    #[test]
    fn group_types_from_running_counts() {
        let classify = |mut s: SgStats| {
            s.classify(117);
            s.group_type
        };
        assert_eq!(classify(stats(3, 4, 3)), GroupType::HasSpare);
        assert_eq!(classify(stats(4, 4, 4)), GroupType::FullyBusy);
        assert_eq!(classify(stats(5, 4, 4)), GroupType::Overloaded);
        // 2 tasks stacked on one of 2 CPUs: util 50% -> still has capacity
        assert_eq!(classify(stats(2, 2, 1)), GroupType::HasSpare);
    }
}

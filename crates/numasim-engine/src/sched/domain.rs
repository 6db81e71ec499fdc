//! Scheduling domains of the modelled machine as build_sched_domains makes them
//! (kernel/sched/topology.c): SMT (a core's siblings), MC (a node: the engine has one LLC per
//! node), and one NUMA level per SLIT distance, with sd_init's constants and sd->imb_numa_nr of
//! the release. The engine has no PELT: the load-tracking sums the scheduler compares are taken
//! at their steady state for tasks that never sleep, from running counts (`cpu_load` & co.).

use crate::kernel::Kernel;
use crate::topology::{mask_nodes, node_bit, NodeMask, Topology};
use crate::variants::{DelayDequeue, ImbNumaNr, SdInit, Variants};

/// SCHED_CAPACITY_SCALE: a CPU's capacity (every CPU of the engine is a full one; the smt_gain
/// of kernels before 4.20, which gave an SMT sibling 589, is not modelled).
pub const SCHED_CAPACITY_SCALE: u64 = 1024;
/// scale_load_down(NICE_0_LOAD): the load of an always-runnable nice-0 task.
pub const NICE_0_LOAD: u64 = 1024;
/// node_reclaim_distance (RECLAIM_DISTANCE): NUMA levels further apart lose fork/exec balancing.
pub const RECLAIM_DISTANCE: u32 = 30;

/// One NUMA sched domain of a node's CPUs (SD_NUMA, overlapping groups).
#[derive(Debug, Clone)]
pub struct NumaDomain {
    /// Index into `Topology::numa_distances` of its distance (sched_domains_numa_distance).
    pub level: usize,
    pub distance: u32,
    /// Nodes spanned (bit n: node n).
    pub span: NodeMask,
    /// CPUs spanned (sd->span_weight).
    pub weight: usize,
    /// Groups as node masks, the local one first, then by CPU number, wrapping
    /// (build_overlap_sched_groups: for_each_cpu_wrap from the domain's CPU).
    pub groups: Vec<NodeMask>,
    pub imb_numa_nr: u32,
    /// SD_BALANCE_FORK | SD_BALANCE_EXEC (distance <= RECLAIM_DISTANCE).
    pub fork_exec: bool,
    /// SD_PREFER_SIBLING of its child (set below the lowest NUMA level only).
    pub prefer_sibling: bool,
}

/// The NUMA domains of every node, lowest first, degenerate ones (the span of their child)
/// removed as cpu_attach_domain does.
#[derive(Debug, Clone, Default)]
pub struct SchedDomains {
    pub numa: Vec<Vec<NumaDomain>>,
}

/// Which level of a CPU's domain chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Smt,
    Mc,
    /// Index into the node's `SchedDomains::numa`.
    Numa(usize),
}

/// sd_init's constants of one level.
#[derive(Debug, Clone, Copy)]
pub struct SdParams {
    pub imbalance_pct: u64,
    pub cache_nice_tries: u32,
    pub busy_factor: u64,
}

impl SchedDomains {
    /// build_sched_domains for `topo` with the release's `imb_numa_nr` rule.
    // kernel/sched/topology.c: sched_init_numa, build_sched_domains, build_overlap_sched_groups
    pub fn build(topo: &Topology, v: &Variants) -> Self {
        let nr = topo.nr_nodes;
        // the spans hold nodes with CPUs only (CPU-less nodes have no sched domain)
        let within = |n: usize, d: u32| (0..nr).filter(|&m| topo.node_distance(n, m) <= d && (m == n || topo.has_cpu(m))).fold(0, |a: NodeMask, m| a | node_bit(m));
        let cpus = |mask: NodeMask| mask_nodes(mask).map(|n| topo.node_cpus[n].len()).sum::<usize>();
        let mut numa = Vec::with_capacity(nr);
        for n in 0..nr {
            let mut doms: Vec<NumaDomain> = Vec::new();
            // imb_numa_nr: the first level above the LLC (PKG, the node) sets `imb`; its span
            // is the node, one LLC: nr_llcs = 1
            let node_cpus = topo.node_cpus[n].len();
            let imb = match v.imb_numa_nr {
                ImbNumaNr::Base => 0,
                ImbNumaNr::V5_18 => (node_cpus >> 2) as u32,
                ImbNumaNr::V6_0 => ((node_cpus >> 3) as u32).max(1),
            };
            // imb_span: the span of the first SD_NUMA level (degenerate or not)
            let first_numa = topo.numa_distances.get(1).map(|&d| cpus(within(n, d))).unwrap_or(node_cpus).max(1);
            let mut child_span = node_bit(n);
            for (level, &d) in topo.numa_distances.iter().enumerate().skip(1) {
                let span = within(n, d);
                if span == child_span {
                    continue; // sd_parent_degenerate
                }
                // the group of node m is m's span one level down (the child domain of its CPUs)
                let prev = topo.numa_distances[level - 1];
                let mut covered: NodeMask = 0;
                let mut groups = Vec::new();
                for m in (n..nr).chain(0..n) {
                    if span & (1 << m) == 0 || covered & (1 << m) != 0 {
                        continue;
                    }
                    let g = within(m, prev) & span;
                    covered |= g;
                    groups.push(g);
                }
                let weight = cpus(span);
                doms.push(NumaDomain {
                    level,
                    distance: d,
                    span,
                    weight,
                    groups,
                    imb_numa_nr: imb * (weight / first_numa).max(1) as u32,
                    fork_exec: d <= RECLAIM_DISTANCE,
                    prefer_sibling: doms.is_empty(),
                });
                child_span = span;
            }
            numa.push(doms);
        }
        SchedDomains { numa }
    }
}

/// sd_init's imbalance_pct, cache_nice_tries and busy_factor of `level` in the release.
// kernel/sched/topology.c: sd_init
pub fn sd_params(v: &Variants, level: Level) -> SdParams {
    let (base_pct, busy_factor) = match v.sd_init {
        SdInit::Base => (125, 32),
        SdInit::V5_10 => (117, 16),
    };
    match level {
        Level::Smt => SdParams { imbalance_pct: 110, cache_nice_tries: 0, busy_factor },
        Level::Mc => SdParams { imbalance_pct: 117, cache_nice_tries: 1, busy_factor },
        Level::Numa(_) => SdParams { imbalance_pct: base_pct, cache_nice_tries: 2, busy_factor },
    }
}

/// Variant combinations no kernel had: code that reads sd->imb_numa_nr with a release that
/// does not compute it. (location, message) per problem.
pub fn variant_conflicts(v: &Variants) -> Vec<(String, String)> {
    use crate::variants::{AdjustNumaImbalance, FindIdlestGroup};
    let mut out = Vec::new();
    if v.imb_numa_nr == ImbNumaNr::Base {
        if v.adjust_numa_imbalance >= AdjustNumaImbalance::V5_18 {
            out.push(("kernel.variants.adjust_numa_imbalance".into(), "this variant reads sd->imb_numa_nr: pick imb_numa_nr 5.18 or later too".into()));
        }
        if v.find_idlest_group >= FindIdlestGroup::V5_18 {
            out.push(("kernel.variants.find_idlest_group".into(), "this variant reads sd->imb_numa_nr: pick imb_numa_nr 5.18 or later too".into()));
        }
    }
    out
}

impl Kernel {
    /// CPUs of the nodes in `mask`, ascending.
    pub fn mask_cpus(&self, mask: NodeMask) -> impl Iterator<Item = usize> + '_ {
        mask_nodes(mask).filter(|&n| n < self.topo.nr_nodes).flat_map(|n| self.topo.node_cpus[n].iter().copied())
    }

    /// rq->nr_running: queued tasks, and tasks left on the runqueue by DELAY_DEQUEUE.
    pub fn nr_running(&self, cpu: usize) -> usize {
        self.cpus[cpu].rq.len() + self.cpus[cpu].delayed.len()
    }

    /// rq->cfs.h_nr_running as update_numa_stats reads it: h_nr_runnable (delayed tasks
    /// excluded) from 6.14 (1a49104496d3).
    pub fn numa_nr_running(&self, cpu: usize) -> usize {
        match self.variants().delay_dequeue {
            DelayDequeue::V6_14 => self.cpus[cpu].rq.len(),
            _ => self.nr_running(cpu),
        }
    }

    /// idle_cpu(): nothing on the runqueue.
    pub fn idle(&self, cpu: usize) -> bool {
        self.nr_running(cpu) == 0
    }

    /// Whether every SMT sibling of `cpu` (itself included) is idle (is_core_idle).
    pub fn core_idle(&self, cpu: usize) -> bool {
        self.idle(cpu) && self.topo.siblings(cpu).all(|s| self.idle(s))
    }

    /// cpu_load(): the PELT load of an always-runnable task is its weight, so NICE_0_LOAD per
    /// task on the runqueue (no PELT: blocked load is not kept).
    pub fn cpu_load(&self, cpu: usize) -> u64 {
        NICE_0_LOAD * self.nr_running(cpu) as u64
    }

    /// cpu_util_cfs(): a CPU running a task is fully used, an idle one not at all.
    pub fn cpu_util(&self, cpu: usize) -> u64 {
        if self.cpus[cpu].rq.is_empty() {
            0
        } else {
            SCHED_CAPACITY_SCALE
        }
    }

    /// cpu_runnable(): SCHED_CAPACITY_SCALE per runnable task.
    pub fn cpu_runnable(&self, cpu: usize) -> u64 {
        SCHED_CAPACITY_SCALE * self.nr_running(cpu) as u64
    }

    /// task_util_est(p): the share of its CPU a task on it gets.
    pub fn task_util(&self, t: usize) -> u64 {
        SCHED_CAPACITY_SCALE / self.cpus[self.tasks[t].cpu].rq.len().max(1) as u64
    }

    /// sd_params of a level, for this kernel's release.
    pub fn sd_params(&self, level: Level) -> SdParams {
        sd_params(self.variants(), level)
    }

    /// The lowest NUMA domain of `node` (per_cpu(sd_numa)), if the machine has several nodes.
    pub fn sd_numa(&self, node: usize) -> Option<&NumaDomain> {
        self.sched_domains.numa[node].first()
    }

    /// env.imbalance_pct of task_numa_migrate: halfway between 100 and sd_numa's.
    // kernel/sched/fair.c: task_numa_migrate
    pub fn numa_env_imbalance_pct(&self, node: usize) -> i64 {
        match self.sd_numa(node) {
            Some(sd) => 100 + (self.sd_params(Level::Numa(sd.level)).imbalance_pct as i64 - 100) / 2,
            None => 112,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::kernel_variants;
    use crate::topology::Topology;

    fn topo(nodes: usize, cpus: usize, distance: Vec<Vec<u32>>) -> Topology {
        Topology::build(&vec![cpus; nodes], 1, vec![1; nodes], distance)
    }

    fn two(cpus: usize) -> Topology {
        topo(2, cpus, vec![vec![10, 21], vec![21, 10]])
    }

    /// kernel/sched/topology.c: build_sched_domains — imb_numa_nr of a node that is one LLC:
    /// none before 5.18; span >> 2 in 5.18 (e496132ebedd); span >> 3, at least 1, from 6.0
    /// (026b98a93bbd). The research note's worked values: the VM (2 x 2 CPUs) gets 1 in 6.1 and
    /// 6.12, 0 in 5.18; 2 x 64 CPUs gets 8 (16 in 5.18).
    #[test]
    fn imb_numa_nr_per_release() {
        let nr = |t: &Topology, v: &str| SchedDomains::build(t, &kernel_variants(v).unwrap()).numa[0][0].imb_numa_nr;
        let (vm, big, four) = (two(2), two(64), topo(4, 12, (0..4).map(|a| (0..4).map(|b| if a == b { 10 } else { 20 }).collect()).collect()));
        assert_eq!((nr(&vm, "5.13"), nr(&vm, "6.1"), nr(&vm, "6.12")), (0, 1, 1));
        assert_eq!((nr(&big, "6.1"), nr(&big, "7.3")), (8, 8));
        assert_eq!(nr(&four, "6.1"), 1, "12 >> 3 = 1");
        let mut v = kernel_variants("6.1").unwrap();
        v.imb_numa_nr = ImbNumaNr::V5_18;
        assert_eq!((SchedDomains::build(&vm, &v).numa[0][0].imb_numa_nr, SchedDomains::build(&big, &v).numa[0][0].imb_numa_nr), (0, 16));
    }

    /// build_overlap_sched_groups: a direct topology has one NUMA level whose groups are the
    /// nodes, local first; on a backplane the 12 level groups the socket's nodes, the 32 level
    /// groups the sockets (each the span of the level below), and forks do not cross 32 > 30.
    #[test]
    fn numa_levels_and_groups_follow_the_slit() {
        let v = kernel_variants("6.12").unwrap();
        let d = SchedDomains::build(&topo(4, 2, (0..4).map(|a| (0..4).map(|b| if a == b { 10 } else { 20 }).collect()).collect()), &v);
        assert_eq!(d.numa[2].len(), 1);
        assert_eq!(d.numa[2][0].groups, vec![0b0100, 0b1000, 0b0001, 0b0010]);
        let bp = vec![vec![10, 12, 32, 32], vec![12, 10, 32, 32], vec![32, 32, 10, 12], vec![32, 32, 12, 10]];
        let d = SchedDomains::build(&topo(4, 2, bp), &v);
        let n1 = &d.numa[1];
        assert_eq!(n1.len(), 2);
        assert_eq!((n1[0].span, n1[0].groups.clone(), n1[0].fork_exec, n1[0].prefer_sibling), (0b0011, vec![0b0010, 0b0001], true, true));
        assert_eq!((n1[1].span, n1[1].groups.clone(), n1[1].fork_exec, n1[1].prefer_sibling), (0b1111, vec![0b0011, 0b1100], false, false));
        // imb_numa_nr grows with the span at higher levels: 1 x 8 / 4
        assert_eq!((n1[0].imb_numa_nr, n1[1].imb_numa_nr), (1, 2));
    }

    /// sd_init: NUMA levels take the base imbalance_pct, 125 before 5.10 and 117 after
    /// (2208cdaa56c9); task_numa_migrate's env uses half of the excess: 112, then 108.
    #[test]
    fn numa_imbalance_pct_by_release() {
        for (version, pct, busy) in [("4.9", 125, 32), ("5.12", 117, 16)] {
            let p = sd_params(&kernel_variants(version).unwrap(), Level::Numa(1));
            assert_eq!((p.imbalance_pct, p.cache_nice_tries, p.busy_factor), (pct, 2, busy), "{version}");
            assert_eq!(100 + (pct as i64 - 100) / 2, if version == "4.9" { 112 } else { 108 });
        }
    }
}

//! Where a task starts or wakes up: select_task_rq_fair's slow path for fork and exec
//! (sched_balance_find_dst_cpu walking the domains with find_idlest_group, per release) and its
//! wake-up fast path (select_idle_sibling), kernel/sched/fair.c.
//!
//! Approximate: cpuidle states are not modelled (every idle CPU is taken to be in the same
//! state, so the most recently idled one wins); wake_affine is not modelled (a task wakes where
//! it slept, or on an idle CPU of that node); a program's first placement is a fork from a
//! launcher on CPU 0 that is not simulated, then exec balancing.

use super::domain::{Level, NICE_0_LOAD, SCHED_CAPACITY_SCALE};
use super::stats::GroupType;
use crate::kernel::Kernel;
use crate::variants::{AdjustNumaImbalance, FindIdlestGroup};

/// SD_BALANCE_FORK or SD_BALANCE_EXEC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdFlag {
    Fork,
    Exec,
}

/// One domain of a CPU's chain as the placement walk sees it.
#[derive(Debug, Clone)]
pub struct Dom {
    pub level: Level,
    /// CPUs spanned, ascending.
    pub span: Vec<usize>,
    /// Groups (CPU lists), the local one first.
    pub groups: Vec<Vec<usize>>,
    pub fork_exec: bool,
    pub imb_numa_nr: u32,
}

/// NUMA_IMBALANCE_MIN: a pair of communicating tasks may stay together on one node.
pub const NUMA_IMBALANCE_MIN: i64 = 2;

impl Kernel {
    /// The domains of `cpu` from the lowest up (sd_degenerate ones left out).
    // kernel/sched/topology.c: build_sched_domains, build_sched_groups
    pub fn domain_chain(&self, cpu: usize) -> Vec<Dom> {
        let node = self.cpu_node(cpu);
        let mut chain: Vec<Dom> = Vec::new();
        let mut core: Vec<usize> = std::iter::once(cpu).chain(self.topo.siblings(cpu)).collect();
        core.sort_unstable();
        // groups of a span: each CPU's child span, from `cpu` on, wrapping
        let wrap = |span: &[usize], group_of: &dyn Fn(usize) -> Vec<usize>| {
            let start = span.iter().position(|&c| c == cpu).unwrap_or(0);
            let mut covered: Vec<usize> = Vec::new();
            let mut groups = Vec::new();
            for &i in span[start..].iter().chain(&span[..start]) {
                if covered.contains(&i) {
                    continue;
                }
                let g = group_of(i);
                covered.extend(&g);
                groups.push(g);
            }
            groups
        };
        if core.len() > 1 {
            chain.push(Dom { level: Level::Smt, groups: wrap(&core, &|i| vec![i]), span: core.clone(), fork_exec: true, imb_numa_nr: 0 });
        }
        let span = self.topo.node_cpus[node].clone();
        if span.len() > core.len() {
            let core_of = |i: usize| {
                let mut c: Vec<usize> = std::iter::once(i).chain(self.topo.siblings(i)).collect();
                c.sort_unstable();
                c
            };
            chain.push(Dom { level: Level::Mc, groups: wrap(&span, &core_of), span, fork_exec: true, imb_numa_nr: 0 });
        }
        for (i, d) in self.sched_domains.numa[node].iter().enumerate() {
            let groups = d.groups.iter().map(|&g| self.mask_cpus(g).collect()).collect();
            chain.push(Dom { level: Level::Numa(i), span: self.mask_cpus(d.span).collect(), groups, fork_exec: d.fork_exec, imb_numa_nr: d.imb_numa_nr });
        }
        chain
    }

    /// adjust_numa_imbalance: no imbalance while the destination runs few tasks and the
    /// difference is at most NUMA_IMBALANCE_MIN (5.11+); the 5.7 form looks at the source.
    /// `dst_running`/`limit`: what the release's caller passes.
    // kernel/sched/fair.c: adjust_numa_imbalance
    pub fn adjust_numa_imbalance(&self, imbalance: i64, dst_running: i64, limit: i64) -> i64 {
        match self.variants().adjust_numa_imbalance {
            AdjustNumaImbalance::Base | AdjustNumaImbalance::V5_6 => imbalance,
            // fb86f5b21192: (imbalance, src_nr_running)
            AdjustNumaImbalance::V5_7 => {
                if dst_running <= NUMA_IMBALANCE_MIN {
                    0
                } else {
                    imbalance
                }
            }
            // 7d2b5dd0bcc4: allow_numa_imbalance(running, weight) = running < weight / 4
            AdjustNumaImbalance::V5_11 => {
                if dst_running < limit >> 2 && imbalance <= NUMA_IMBALANCE_MIN {
                    0
                } else {
                    imbalance
                }
            }
            // 2cfb7a1b031b, cb29a5c19d2d: running <= imb_numa_nr
            AdjustNumaImbalance::V5_18 | AdjustNumaImbalance::V6_0 => {
                if dst_running <= limit && imbalance <= NUMA_IMBALANCE_MIN {
                    0
                } else {
                    imbalance
                }
            }
        }
    }

    /// The CPU a forked (`flag` Fork) or exec'ing task `p` should run on, `this_cpu` being the
    /// CPU doing the fork or exec and `prev_cpu` the task's CPU.
    // kernel/sched/fair.c: select_task_rq_fair (WF_FORK, WF_EXEC), sched_balance_find_dst_cpu
    pub fn select_task_rq_fork(&self, p: usize, prev_cpu: usize, this_cpu: usize, flag: SdFlag) -> usize {
        let allowed = &self.tasks[p].allowed;
        let chain = self.domain_chain(this_cpu);
        // the highest domain with the flag, the walk stopping at the first without (!want_affine)
        let top = chain.iter().take_while(|d| d.fork_exec).count();
        if top == 0 {
            return self.select_fallback_rq(p, prev_cpu);
        }
        let mut chain = chain;
        let mut sd = Some(top - 1);
        let mut cpu = this_cpu;
        let mut new_cpu = this_cpu;
        if !chain[top - 1].span.iter().any(|&c| allowed[c]) {
            return self.select_fallback_rq(p, prev_cpu);
        }
        let without = (flag == SdFlag::Exec).then_some((p, self.tasks[p].cpu));
        while let Some(di) = sd {
            if !chain[di].fork_exec {
                sd = di.checked_sub(1);
                continue;
            }
            let Some(g) = self.find_idlest_group(&chain[di], p, cpu, without) else {
                sd = di.checked_sub(1);
                continue;
            };
            new_cpu = self.find_idlest_group_cpu(&chain[di].groups[g], p, cpu);
            if new_cpu == cpu {
                sd = di.checked_sub(1);
                continue;
            }
            // now try balancing at a lower domain level of new_cpu
            cpu = new_cpu;
            let weight = chain[di].span.len();
            chain = self.domain_chain(cpu);
            sd = chain.iter().take_while(|d| d.span.len() < weight).enumerate().filter(|(_, d)| d.fork_exec).map(|(i, _)| i).last();
        }
        if allowed[new_cpu] {
            new_cpu
        } else {
            self.select_fallback_rq(p, prev_cpu)
        }
    }

    /// An allowed CPU when the chosen one is not: one of prev's node, else the first allowed.
    // kernel/sched/core.c: select_fallback_rq
    pub fn select_fallback_rq(&self, p: usize, prev_cpu: usize) -> usize {
        let allowed = &self.tasks[p].allowed;
        if allowed[prev_cpu] {
            return prev_cpu;
        }
        let node = self.cpu_node(prev_cpu);
        self.topo.node_cpus[node].iter().copied().find(|&c| allowed[c]).or_else(|| (0..self.cpus.len()).find(|&c| allowed[c])).unwrap_or(prev_cpu)
    }

    /// The idlest group of `dom` for `p`, or None to stay in the local group.
    // kernel/sched/fair.c: find_idlest_group / sched_balance_find_dst_group
    fn find_idlest_group(&self, dom: &Dom, p: usize, this_cpu: usize, without: Option<(usize, usize)>) -> Option<usize> {
        match self.variants().find_idlest_group {
            FindIdlestGroup::Base => self.find_idlest_group_v3(dom, p, this_cpu),
            _ => self.find_idlest_group_v5_5(dom, p, this_cpu, without),
        }
    }

    /// The least loaded group, unless the local one is within half of imbalance_pct of it.
    // kernel/sched/fair.c (3.x-4.9): find_idlest_group
    fn find_idlest_group_v3(&self, dom: &Dom, p: usize, this_cpu: usize) -> Option<usize> {
        let allowed = &self.tasks[p].allowed;
        let imbalance = 100 + (self.sd_params(dom.level).imbalance_pct - 100) / 2;
        let (mut this_load, mut min_load, mut idlest) = (0u64, u64::MAX, None);
        for (gi, g) in dom.groups.iter().enumerate() {
            if !g.iter().any(|&c| allowed[c]) {
                continue;
            }
            // forkexec_idx 0: source_load = target_load = weighted_cpuload
            let load: u64 = g.iter().map(|&c| self.cpu_load(c)).sum();
            let avg_load = load * SCHED_CAPACITY_SCALE / (SCHED_CAPACITY_SCALE * g.len() as u64);
            if g.contains(&this_cpu) {
                this_load = avg_load;
            } else if avg_load < min_load {
                (min_load, idlest) = (avg_load, Some(gi));
            }
        }
        if idlest.is_none() || 100 * this_load < imbalance * min_load {
            return None;
        }
        idlest
    }

    /// Group types, then the idlest non-local group against the local one; at a NUMA level
    /// with spare capacity, the release's NUMA rule.
    // kernel/sched/fair.c (5.5+): find_idlest_group, update_pick_idlest
    fn find_idlest_group_v5_5(&self, dom: &Dom, p: usize, this_cpu: usize, without: Option<(usize, usize)>) -> Option<usize> {
        let allowed = &self.tasks[p].allowed;
        let pct = self.sd_params(dom.level).imbalance_pct;
        let mut local = None;
        let mut idlest: Option<(usize, super::stats::SgStats)> = None;
        for (gi, g) in dom.groups.iter().enumerate() {
            if !g.iter().any(|&c| allowed[c]) {
                continue;
            }
            let sgs = self.update_sg_wakeup_stats(g, pct, without);
            if g.contains(&this_cpu) {
                local = Some((gi, sgs));
                continue;
            }
            // update_pick_idlest (the initial idlest_sgs is overloaded with avg_load UINT_MAX)
            let better = match &idlest {
                None => true,
                Some((_, best)) if sgs.group_type != best.group_type => sgs.group_type < best.group_type,
                Some((_, best)) => match sgs.group_type {
                    GroupType::Overloaded | GroupType::FullyBusy => sgs.avg_load < best.avg_load,
                    GroupType::HasSpare => sgs.idle_cpus > best.idle_cpus || (sgs.idle_cpus == best.idle_cpus && sgs.group_util < best.group_util),
                },
            };
            if better {
                idlest = Some((gi, sgs));
            }
        }
        let (gi, idlest_sgs) = idlest?;
        let Some((_, local_sgs)) = local else { return Some(gi) };
        if local_sgs.group_type != idlest_sgs.group_type {
            return (local_sgs.group_type > idlest_sgs.group_type).then_some(gi);
        }
        let numa = matches!(dom.level, Level::Numa(_));
        match local_sgs.group_type {
            GroupType::Overloaded | GroupType::FullyBusy => {
                let imbalance = NICE_0_LOAD * (pct - 100) / 100;
                if numa && idlest_sgs.avg_load + imbalance >= local_sgs.avg_load {
                    return None;
                }
                if idlest_sgs.avg_load >= local_sgs.avg_load + imbalance || 100 * local_sgs.avg_load <= pct * idlest_sgs.avg_load {
                    return None;
                }
            }
            GroupType::HasSpare => {
                if numa {
                    match self.numa_stay_local(dom, p, this_cpu, gi, &local_sgs, &idlest_sgs) {
                        Some(true) => return None,
                        Some(false) => return Some(gi),
                        None => {}
                    }
                }
                if local_sgs.idle_cpus >= idlest_sgs.idle_cpus {
                    return None;
                }
            }
        }
        Some(gi)
    }

    /// The NUMA branch of find_idlest_group with spare capacity: Some(true) keeps the task
    /// local, Some(false) takes the idlest group, None leaves it to the idle-CPU counts.
    // kernel/sched/fair.c: find_idlest_group (CONFIG_NUMA, group_has_spare)
    fn numa_stay_local(&self, dom: &Dom, p: usize, this_cpu: usize, idlest: usize, local: &super::stats::SgStats, idlest_sgs: &super::stats::SgStats) -> Option<bool> {
        // CONFIG_NUMA_BALANCING: the preferred node first (a thread inherits its parent's)
        let pref = self.tasks[p].numa.preferred_nid;
        if pref.is_some() {
            if Some(self.cpu_node(this_cpu)) == pref {
                return Some(true);
            }
            if Some(self.cpu_node(dom.groups[idlest][0])) == pref {
                return Some(false);
            }
        }
        let local_running = local.sum_nr_running as i64;
        // the callers count the task being placed: local running + 1
        let dst_running = local_running + 1;
        let stay = match self.variants().find_idlest_group {
            FindIdlestGroup::Base => false,
            // 57abff067a08: stay while the local node has an idle CPU
            FindIdlestGroup::V5_5 => local.idle_cpus > 0,
            // 23e6082a522e: allow_numa_imbalance(local running, sd->span_weight)
            FindIdlestGroup::V5_11 => local_running < (dom.span.len() as i64 >> 2),
            // 2cfb7a1b031b: allow_numa_imbalance(local running + 1, sd->imb_numa_nr)
            FindIdlestGroup::V5_18 => dst_running <= dom.imb_numa_nr as i64,
            // cb29a5c19d2d, f5b2eeb49991: the idle-CPU difference, adjusted
            FindIdlestGroup::V6_0 => {
                let allowed_local = dom.groups[0].iter().filter(|&&c| self.tasks[p].allowed[c]).count() as i64;
                let n = allowed_local.min(dom.imb_numa_nr as i64);
                let imbalance = (local.idle_cpus as i64 - idlest_sgs.idle_cpus as i64).abs();
                // adjust_numa_imbalance(imbalance, local running + 1, n) == 0, in its 6.0 form
                imbalance == 0 || (dst_running <= n && imbalance <= NUMA_IMBALANCE_MIN)
            }
        };
        stay.then_some(true)
    }

    /// The CPU of `group` for `p`: an idle one (the most recently idled), else the least loaded.
    // kernel/sched/fair.c: find_idlest_group_cpu / sched_balance_find_dst_group_cpu
    fn find_idlest_group_cpu(&self, group: &[usize], p: usize, this_cpu: usize) -> usize {
        if group.len() == 1 {
            return group[0];
        }
        let classic = self.variants().find_idlest_group == FindIdlestGroup::Base;
        let (mut shallowest, mut latest) = (None, 0u64);
        let (mut least_loaded, mut min_load) = (this_cpu, u64::MAX);
        for &i in group.iter().filter(|&&c| self.tasks[p].allowed[c]) {
            if self.idle(i) {
                if shallowest.is_none() || self.cpus[i].idle_stamp > latest {
                    (shallowest, latest) = (Some(i), self.cpus[i].idle_stamp);
                }
            } else if shallowest.is_none() {
                let load = self.cpu_load(i);
                if load < min_load || (classic && load == min_load && i == this_cpu) {
                    (min_load, least_loaded) = (load, i);
                }
            }
        }
        shallowest.unwrap_or(least_loaded)
    }

    /// A woken task's CPU: `target` if idle, else prev if idle in the same LLC, else an idle
    /// core or CPU of target's LLC (the node), else target.
    // kernel/sched/fair.c: select_idle_sibling, select_idle_core, select_idle_cpu
    pub fn select_idle_sibling(&self, p: usize, prev: usize, target: usize) -> usize {
        let allowed = &self.tasks[p].allowed;
        let ok = |c: usize| allowed[c] && self.idle(c);
        if ok(target) {
            return target;
        }
        let node = self.cpu_node(target);
        if prev != target && self.cpu_node(prev) == node && ok(prev) {
            return prev;
        }
        let cpus = &self.topo.node_cpus[node];
        let start = cpus.iter().position(|&c| c == target).map_or(0, |i| i + 1);
        let order = cpus[start..].iter().chain(&cpus[..start]).copied();
        if self.topo.smt > 1 {
            let has_idle_core = cpus.iter().any(|&c| self.core_idle(c));
            if !has_idle_core && self.cpu_node(prev) == node {
                // select_idle_smt: an idle sibling of prev
                if let Some(s) = self.topo.siblings(prev).find(|&s| ok(s)) {
                    return s;
                }
            }
            if has_idle_core {
                if let Some(c) = order.clone().find(|&c| ok(c) && self.core_idle(c)) {
                    return c;
                }
            }
        }
        order.clone().find(|&c| ok(c)).unwrap_or(if allowed[target] { target } else { self.select_fallback_rq(p, prev) })
    }
}

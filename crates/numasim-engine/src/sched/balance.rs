//! The load balancer at the NUMA levels (kernel/sched/fair.c: rebalance_domains,
//! sched_balance_rq / load_balance, sched_balance_find_src_group, calculate_imbalance,
//! sched_balance_find_src_rq, detach_tasks, need_active_balance, active_load_balance_cpu_stop),
//! periodic on the CPU should_we_balance picks and newly idle, with the release's rules.
//! The locality rules of can_migrate_task are in balance_locality.rs.
//!
//! Approximate: group statistics, classification and calculate_imbalance are the 5.5 rework's
//! (0b0695f2b34a) for every release (the older load-based find_busiest_group is not modelled);
//! no misfit, asymmetric-packing or pinned-imbalance groups, no LBF_DST_PINNED retry (affinity
//! masks in the engine are whole nodes); idle CPUs balance on their own tick (no NOHZ idle
//! balancer), newidle balancing is not limited by avg_idle, SD_SERIALIZE is not modelled.

use super::domain::{Level, NumaDomain, SCHED_CAPACITY_SCALE};
use super::stats::{GroupType, SgStats};
use crate::kernel::Kernel;
use crate::variants::{ActiveBalance, AdjustNumaImbalance, LbSpareImbalance, NeedActiveBalance};

/// sysctl_sched_nr_migrate: tasks examined per balance at most.
const SCHED_NR_MIGRATE: usize = 32;
/// MAX_PINNED_INTERVAL, ms.
const MAX_PINNED_INTERVAL: u64 = 512;

/// The balancing state of one CPU's NUMA sched domain (struct sched_domain).
#[derive(Debug, Clone, Copy, Default)]
pub struct SdState {
    pub nr_balance_failed: u32,
    /// sd->balance_interval, ms; 0 until first used (then sd->min_interval).
    pub balance_interval: u64,
    /// sd->last_balance, ns.
    pub last_balance: u64,
}

/// enum cpu_idle_type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuIdle {
    NotIdle,
    Idle,
    NewlyIdle,
}

/// enum migration_type (no misfit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationType {
    Load,
    Util,
    Task,
}

/// enum fbq_type: regular < remote < all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FbqType {
    Regular,
    Remote,
    All,
}

/// The NUMA class of a group or runqueue: some task without a preferred node, some task off
/// it, or every task on it.
// kernel/sched/fair.c: fbq_classify_group, fbq_classify_rq
pub fn fbq_classify(nr_running: usize, nr_numa_running: usize, nr_preferred_running: usize) -> FbqType {
    if nr_running > nr_numa_running {
        FbqType::Regular
    } else if nr_running > nr_preferred_running {
        FbqType::Remote
    } else {
        FbqType::All
    }
}

/// struct lb_env (the fields the engine uses).
pub struct LbEnv {
    pub dom: NumaDomain,
    pub dst_cpu: usize,
    pub src_cpu: usize,
    pub idle: CpuIdle,
    pub imbalance: i64,
    pub migration_type: MigrationType,
    fbq_type: FbqType,
    /// LBF_ACTIVE_LB (5.13+).
    pub active_lb: bool,
    /// LBF_ALL_PINNED.
    all_pinned: bool,
    /// env->cpus: runqueues still considered.
    cpus: Vec<bool>,
    pub nr_balance_failed: u32,
    pub cache_nice_tries: u32,
    imbalance_pct: u64,
    /// When the balance runs (rq_clock), ns.
    pub now: u64,
}

impl LbEnv {
    /// An environment balancing `src_cpu` into `dst_cpu` over the lowest NUMA domain.
    #[cfg(test)]
    pub fn for_test(k: &Kernel, dst_cpu: usize, src_cpu: usize, idle: CpuIdle) -> Self {
        let dom = k.sched_domains.numa[k.cpu_node(dst_cpu)][0].clone();
        LbEnv {
            dom,
            dst_cpu,
            src_cpu,
            idle,
            imbalance: 0,
            migration_type: MigrationType::Task,
            fbq_type: FbqType::All,
            active_lb: false,
            all_pinned: false,
            cpus: vec![true; k.cpus.len()],
            nr_balance_failed: 0,
            cache_nice_tries: 2,
            imbalance_pct: 117,
            now: k.now + k.tick_ns,
        }
    }

    /// The environment of a busy CPU's migrate_load balance at the MC level (its node's CPUs),
    /// as sched_balance_find_src_rq, detach_tasks and can_migrate_task read it (balance_mc.rs).
    pub(super) fn for_mc(k: &Kernel, dst_cpu: usize, nr_balance_failed: u32, imbalance: i64, fbq_type: FbqType) -> Self {
        let node = k.cpu_node(dst_cpu);
        let dom = NumaDomain {
            level: 0,
            distance: k.topo.node_distance(node, node),
            span: crate::topology::node_bit(node),
            weight: k.topo.node_cpus[node].len(),
            groups: vec![crate::topology::node_bit(node)],
            imb_numa_nr: 0,
            fork_exec: true,
            prefer_sibling: false,
        };
        let params = k.sd_params(Level::Mc);
        LbEnv {
            dom,
            dst_cpu,
            src_cpu: dst_cpu,
            idle: CpuIdle::NotIdle,
            imbalance,
            migration_type: MigrationType::Load,
            fbq_type,
            active_lb: false,
            all_pinned: false,
            cpus: Vec::new(),
            nr_balance_failed,
            cache_nice_tries: params.cache_nice_tries,
            imbalance_pct: params.imbalance_pct,
            now: k.now + k.tick_ns,
        }
    }

    /// A task that may run on dst_cpu was found: clear LBF_ALL_PINNED.
    pub fn set_some_allowed(&mut self) {
        self.all_pinned = false;
    }
}

impl Kernel {
    fn sd_state(&mut self, cpu: usize, level: usize) -> &mut SdState {
        &mut self.numa_sd[cpu][level]
    }

    /// get_sd_balance_interval in ns: balance_interval, times busy_factor on a busy CPU (one
    /// jiffy less), within 1 jiffy .. max_load_balance_interval (HZ * CPUs / 10).
    // kernel/sched/fair.c: get_sd_balance_interval
    pub(super) fn sd_balance_interval(&self, balance_interval_ms: u64, level: Level, busy: bool) -> u64 {
        let hz = self.cfg.hz as u64;
        let ms = if busy { balance_interval_ms * self.sd_params(level).busy_factor } else { balance_interval_ms };
        let mut jiffies = (ms * hz).div_ceil(1000);
        if busy {
            jiffies = jiffies.saturating_sub(1);
        }
        jiffies.clamp(1, (hz * self.cpus.len() as u64 / 10).max(1)) * self.tick_ns
    }

    #[cfg(test)]
    pub fn sd_balance_interval_for_test(&self, ms: u64, level: usize, busy: bool) -> u64 {
        self.sd_balance_interval(ms, Level::Numa(level), busy)
    }

    /// The periodic balance of every CPU's NUMA domains that is due this tick: the CPU
    /// should_we_balance picks in its local group (its first idle CPU, else its first CPU) runs
    /// sched_balance_rq; on the others it finds the domain balanced.
    // kernel/sched/fair.c: sched_balance_domains (rebalance_domains), should_we_balance
    pub fn rebalance_numa_domains(&mut self) {
        let now = self.now + self.tick_ns;
        for cpu in 0..self.cpus.len() {
            let node = self.cpu_node(cpu);
            for di in 0..self.sched_domains.numa[node].len() {
                let (level, weight, local) = {
                    let d = &self.sched_domains.numa[node][di];
                    (d.level, d.weight as u64, d.groups[0])
                };
                let idle = self.idle(cpu);
                if self.numa_sd[cpu][level].balance_interval == 0 {
                    self.numa_sd[cpu][level].balance_interval = weight; // sd->min_interval
                }
                let st = self.numa_sd[cpu][level];
                if now < st.last_balance + self.sd_balance_interval(st.balance_interval, Level::Numa(level), !idle) {
                    continue;
                }
                let balancer = {
                    let mut group = self.mask_cpus(local);
                    let first = self.mask_cpus(local).next().unwrap_or(cpu);
                    group.find(|&c| self.idle(c)).unwrap_or(first)
                };
                if balancer == cpu {
                    self.sched_balance_rq(cpu, di, if idle { CpuIdle::Idle } else { CpuIdle::NotIdle });
                    self.sd_state(cpu, level).last_balance = now;
                } else {
                    // should_we_balance() false: out_balanced, and no higher domain this time
                    let st = self.sd_state(cpu, level);
                    st.nr_balance_failed = 0;
                    if st.balance_interval < 2 * weight {
                        st.balance_interval *= 2;
                    }
                    st.last_balance = now;
                    break;
                }
            }
        }
    }

    /// A newly idle CPU tries its NUMA domains, lowest first, until it pulled a task.
    // kernel/sched/fair.c: sched_balance_newidle
    pub fn newidle_balance_numa(&mut self, cpu: usize) -> bool {
        let node = self.cpu_node(cpu);
        for di in 0..self.sched_domains.numa[node].len() {
            if self.sched_balance_rq(cpu, di, CpuIdle::NewlyIdle) {
                return true;
            }
        }
        false
    }

    /// One load balance of `dst_cpu`'s NUMA domain `di`: pull tasks from the busiest group's
    /// busiest runqueue, or push its running task over by active balancing. True if it moved a
    /// task (active balancing does not count).
    // kernel/sched/fair.c: sched_balance_rq (load_balance)
    pub fn sched_balance_rq(&mut self, dst_cpu: usize, di: usize, idle: CpuIdle) -> bool {
        let dom = self.sched_domains.numa[self.cpu_node(dst_cpu)][di].clone();
        let level = dom.level;
        let params = self.sd_params(Level::Numa(level));
        let min_interval = dom.weight as u64;
        let mut span = vec![false; self.cpus.len()];
        for c in self.mask_cpus(dom.span) {
            span[c] = true;
        }
        if self.numa_sd[dst_cpu][level].balance_interval == 0 {
            self.numa_sd[dst_cpu][level].balance_interval = min_interval;
        }
        let mut env = LbEnv {
            dom,
            dst_cpu,
            src_cpu: dst_cpu,
            idle,
            imbalance: 0,
            migration_type: MigrationType::Task,
            fbq_type: FbqType::All,
            active_lb: false,
            all_pinned: false,
            cpus: span,
            nr_balance_failed: self.numa_sd[dst_cpu][level].nr_balance_failed,
            cache_nice_tries: params.cache_nice_tries,
            imbalance_pct: params.imbalance_pct,
            now: self.now + self.tick_ns,
        };
        let mut moved = 0;
        let busiest = loop {
            let Some(group) = self.find_src_group(&mut env) else { return self.lb_out_balanced(&env, false) };
            let cpus = self.mask_cpus(env.dom.groups[group]).filter(|&c| env.cpus[c]);
            let Some(busiest) = self.find_src_rq(&env, cpus) else { return self.lb_out_balanced(&env, false) };
            env.src_cpu = busiest;
            env.all_pinned = true;
            if self.nr_running(busiest) > 1 {
                moved = self.detach_tasks(&mut env);
                if env.all_pinned {
                    // every task there is pinned away from us: try the other runqueues
                    env.cpus[busiest] = false;
                    let local: Vec<usize> = self.mask_cpus(env.dom.groups[0]).collect();
                    if (0..self.cpus.len()).any(|c| env.cpus[c] && !local.contains(&c)) {
                        continue;
                    }
                    return self.lb_out_balanced(&env, true);
                }
            }
            break busiest;
        };
        let mut active = false;
        if moved == 0 {
            if idle != CpuIdle::NewlyIdle {
                self.numa_sd[dst_cpu][level].nr_balance_failed += 1;
            }
            env.nr_balance_failed = self.numa_sd[dst_cpu][level].nr_balance_failed;
            if self.need_active_balance(&env) {
                let curr = self.cpus[busiest].curr();
                if !curr.is_some_and(|t| self.tasks[t].allowed[dst_cpu]) {
                    return self.lb_out_one_pinned(&env);
                }
                active = true;
                if self.variants().active_balance == ActiveBalance::Base {
                    // "We've kicked active balancing, force task migration"
                    self.numa_sd[dst_cpu][level].nr_balance_failed = env.cache_nice_tries + 1;
                    env.nr_balance_failed = env.cache_nice_tries + 1;
                }
                self.active_load_balance_cpu_stop(&env, busiest);
            }
        } else {
            self.numa_sd[dst_cpu][level].nr_balance_failed = 0;
            env.nr_balance_failed = 0;
        }
        let voluntary = self.variants().need_active_balance >= NeedActiveBalance::V5_12 && self.need_active_balance(&env);
        if !active || voluntary {
            self.numa_sd[dst_cpu][level].balance_interval = min_interval;
        }
        moved > 0
    }

    /// out_balanced / out_all_pinned: the counter restarts and the interval grows.
    fn lb_out_balanced(&mut self, env: &LbEnv, all_pinned: bool) -> bool {
        self.numa_sd[env.dst_cpu][env.dom.level].nr_balance_failed = 0;
        let env_pinned = LbEnv { all_pinned, ..self.env_copy(env) };
        self.lb_out_one_pinned(&env_pinned)
    }

    fn env_copy(&self, env: &LbEnv) -> LbEnv {
        LbEnv { dom: env.dom.clone(), cpus: Vec::new(), ..*env }
    }

    // kernel/sched/fair.c: sched_balance_rq, out_one_pinned
    fn lb_out_one_pinned(&mut self, env: &LbEnv) -> bool {
        if env.idle == CpuIdle::NewlyIdle {
            return false;
        }
        let max_interval = 2 * env.dom.weight as u64;
        let st = &mut self.numa_sd[env.dst_cpu][env.dom.level];
        if (env.all_pinned && st.balance_interval < MAX_PINNED_INTERVAL) || st.balance_interval < max_interval {
            st.balance_interval *= 2;
        }
        false
    }

    /// The busiest group and, in env, the imbalance to fix; None if balanced.
    // kernel/sched/fair.c: sched_balance_find_src_group (find_busiest_group), update_sd_lb_stats
    fn find_src_group(&self, env: &mut LbEnv) -> Option<usize> {
        let groups: Vec<Vec<usize>> = env.dom.groups.iter().map(|&g| self.mask_cpus(g).filter(|&c| env.cpus[c]).collect()).collect();
        let stats: Vec<SgStats> = groups.iter().map(|g| self.update_sg_lb_stats(g, env.imbalance_pct)).collect();
        let local = stats[0];
        let mut busiest: Option<usize> = None;
        for gi in 1..groups.len() {
            if groups[gi].is_empty() || stats[gi].sum_h_nr_running == 0 {
                continue;
            }
            let s = &stats[gi];
            let better = match busiest {
                None => true,
                Some(b) => {
                    let b = &stats[b];
                    if s.group_type != b.group_type {
                        s.group_type > b.group_type
                    } else {
                        match s.group_type {
                            GroupType::Overloaded => s.avg_load > b.avg_load,
                            // avg_load is 0 here: the first (5.5), the last unless SMT (6.6)
                            GroupType::FullyBusy => self.variants().lb_spare_imbalance >= LbSpareImbalance::V6_6,
                            GroupType::HasSpare => s.idle_cpus < b.idle_cpus || (s.idle_cpus == b.idle_cpus && s.sum_nr_running > b.sum_nr_running),
                        }
                    }
                }
            };
            if better {
                busiest = Some(gi);
            }
        }
        let bi = busiest?;
        let b = stats[bi];
        env.fbq_type = fbq_classify(b.sum_nr_running, b.nr_numa_running, b.nr_preferred_running);
        let total_load: u64 = stats.iter().map(|s| s.group_load).sum();
        let total_capacity: u64 = stats.iter().map(|s| s.group_capacity).sum();
        let sds_avg_load = total_load * SCHED_CAPACITY_SCALE / total_capacity.max(1);
        if local.group_type > b.group_type {
            return None;
        }
        if local.group_type == GroupType::Overloaded && (local.avg_load >= b.avg_load || local.avg_load >= sds_avg_load || 100 * b.avg_load <= env.imbalance_pct * local.avg_load) {
            return None;
        }
        let prefer_sibling = env.dom.prefer_sibling;
        let force = prefer_sibling
            && local.group_type == GroupType::HasSpare
            && match self.variants().lb_spare_imbalance {
                LbSpareImbalance::Base => b.sum_nr_running > local.sum_nr_running + 1,
                LbSpareImbalance::V6_6 => sibling_imbalance(env, &b, &local) > 1,
            };
        // busiest not overloaded: only an idle CPU pulls, and only for a real difference
        if !force && b.group_type != GroupType::Overloaded && (env.idle == CpuIdle::NotIdle || (b.group_weight > 1 && local.idle_cpus <= b.idle_cpus + 1) || b.sum_h_nr_running == 1) {
            return None;
        }
        self.calculate_imbalance(env, &local, &b, sds_avg_load);
        (env.imbalance > 0).then_some(bi)
    }

    /// How much to move, and of what.
    // kernel/sched/fair.c: calculate_imbalance
    fn calculate_imbalance(&self, env: &mut LbEnv, local: &SgStats, busiest: &SgStats, sds_avg_load: u64) {
        if local.group_type == GroupType::HasSpare {
            if busiest.group_type > GroupType::FullyBusy {
                // not an LLC domain: fill the local spare capacity
                env.migration_type = MigrationType::Util;
                env.imbalance = (local.group_capacity.max(local.group_util) - local.group_util) as i64;
                if env.idle != CpuIdle::NotIdle && env.imbalance == 0 {
                    env.migration_type = MigrationType::Task;
                    env.imbalance = 1;
                }
                return;
            }
            env.migration_type = MigrationType::Task;
            let diff = if busiest.group_weight == 1 || env.dom.prefer_sibling {
                match self.variants().lb_spare_imbalance {
                    LbSpareImbalance::Base => busiest.sum_nr_running.saturating_sub(local.sum_nr_running) as i64,
                    LbSpareImbalance::V6_6 => sibling_imbalance(env, busiest, local),
                }
            } else {
                (local.idle_cpus as i64 - busiest.idle_cpus as i64).max(0)
            };
            let imb_numa_nr = env.dom.imb_numa_nr as i64;
            env.imbalance = match self.variants().adjust_numa_imbalance {
                AdjustNumaImbalance::Base => diff >> 1,
                // b396f52326de: a pair of communicating tasks may stay
                AdjustNumaImbalance::V5_6 => {
                    if busiest.sum_nr_running <= 2 {
                        0
                    } else {
                        diff >> 1
                    }
                }
                AdjustNumaImbalance::V5_7 => self.adjust_numa_imbalance(diff >> 1, busiest.sum_nr_running as i64, 0),
                AdjustNumaImbalance::V5_11 => self.adjust_numa_imbalance(diff >> 1, busiest.sum_nr_running as i64, busiest.group_weight as i64),
                AdjustNumaImbalance::V5_18 => self.adjust_numa_imbalance(diff >> 1, local.sum_nr_running as i64 + 1, imb_numa_nr),
                // cb29a5c19d2d: adjust the whole difference, then halve it
                AdjustNumaImbalance::V6_0 => self.adjust_numa_imbalance(diff, local.sum_nr_running as i64 + 1, imb_numa_nr) >> 1,
            };
            return;
        }
        let mut local_avg = local.avg_load;
        if local.group_type < GroupType::Overloaded {
            local_avg = local.group_load * SCHED_CAPACITY_SCALE / local.group_capacity.max(1);
            if local_avg >= busiest.avg_load || local_avg >= sds_avg_load {
                env.imbalance = 0;
                return;
            }
        }
        env.migration_type = MigrationType::Load;
        let a = busiest.avg_load.saturating_sub(sds_avg_load) * busiest.group_capacity;
        let b = sds_avg_load.saturating_sub(local_avg) * local.group_capacity;
        env.imbalance = (a.min(b) / SCHED_CAPACITY_SCALE) as i64;
    }

    /// The busiest runqueue of the group, skipping those whose NUMA class is above fbq_type.
    // kernel/sched/fair.c: sched_balance_find_src_rq (find_busiest_queue), fbq_classify_rq
    pub(super) fn find_src_rq(&self, env: &LbEnv, cpus: impl Iterator<Item = usize>) -> Option<usize> {
        let mut busiest = None;
        let (mut busiest_nr, mut busiest_load, mut busiest_util) = (0, 0, 0);
        for cpu in cpus {
            let (numa, pref) = self.rq_numa_counts(cpu);
            if fbq_classify(self.nr_running(cpu), numa, pref) > env.fbq_type {
                continue;
            }
            let nr = self.cpus[cpu].rq.len();
            if nr == 0 {
                continue;
            }
            match env.migration_type {
                MigrationType::Load => {
                    let load = self.cpu_load(cpu);
                    if nr == 1 && load as i64 > env.imbalance {
                        continue;
                    }
                    if load > busiest_load {
                        (busiest_load, busiest) = (load, Some(cpu));
                    }
                }
                MigrationType::Util => {
                    let util = self.cpu_util(cpu);
                    if nr <= 1 {
                        continue;
                    }
                    if util > busiest_util {
                        (busiest_util, busiest) = (util, Some(cpu));
                    }
                }
                MigrationType::Task => {
                    if nr > busiest_nr {
                        (busiest_nr, busiest) = (nr, Some(cpu));
                    }
                }
            }
        }
        busiest
    }

    /// Pull up to the imbalance from env.src_cpu to env.dst_cpu: queued tasks from the least
    /// recently run (the tail of cfs_tasks) on. Returns how many moved.
    // kernel/sched/fair.c: detach_tasks, attach_tasks
    pub(super) fn detach_tasks(&mut self, env: &mut LbEnv) -> usize {
        let src = env.src_cpu;
        if self.nr_running(src) <= 1 {
            env.all_pinned = false;
            return 0;
        }
        if env.imbalance <= 0 {
            return 0;
        }
        let rq = &self.cpus[src].rq;
        let order: Vec<usize> = rq[1..].iter().chain(&rq[..1]).copied().collect();
        let loop_max = SCHED_NR_MIGRATE.min(self.nr_running(src));
        let mut detached = 0;
        for &p in order.iter().take(loop_max) {
            if env.idle != CpuIdle::NotIdle && self.nr_running(src) <= 1 {
                break;
            }
            if !self.can_migrate_task(p, env) {
                continue;
            }
            let shift = env.nr_balance_failed.min(63);
            match env.migration_type {
                MigrationType::Load => {
                    let load = super::domain::NICE_0_LOAD;
                    if (load >> shift) as i64 > env.imbalance {
                        continue;
                    }
                    env.imbalance -= load as i64;
                }
                MigrationType::Util => {
                    let util = self.task_util(p);
                    if (util >> shift) as i64 > env.imbalance {
                        continue;
                    }
                    env.imbalance -= util as i64;
                }
                MigrationType::Task => env.imbalance -= 1,
            }
            self.move_task(p, env.dst_cpu);
            detached += 1;
            // CONFIG_PREEMPTION: a newly idle CPU takes one task
            if env.idle == CpuIdle::NewlyIdle || env.imbalance <= 0 {
                break;
            }
        }
        detached
    }

    /// Whether the failures call for pushing the busiest CPU's running task over.
    // kernel/sched/fair.c: need_active_balance, imbalanced_active_balance (e9b9734b7465)
    fn need_active_balance(&self, env: &LbEnv) -> bool {
        let failed = env.nr_balance_failed > env.cache_nice_tries + 2;
        match self.variants().need_active_balance {
            NeedActiveBalance::Base => failed,
            NeedActiveBalance::V5_12 => failed && env.migration_type == MigrationType::Task,
        }
    }

    /// The stopper on the busiest CPU pushes one task (its running one, if alone) to dst_cpu.
    // kernel/sched/fair.c: active_load_balance_cpu_stop, detach_one_task
    fn active_load_balance_cpu_stop(&mut self, env: &LbEnv, busiest: usize) {
        let rq = &self.cpus[busiest].rq;
        if rq.is_empty() {
            return;
        }
        let order: Vec<usize> = rq[1..].iter().chain(&rq[..1]).copied().collect();
        let mut stop_env = LbEnv { idle: CpuIdle::Idle, src_cpu: busiest, active_lb: self.variants().active_balance >= ActiveBalance::V5_13, ..self.env_copy(env) };
        stop_env.nr_balance_failed = self.numa_sd[env.dst_cpu][env.dom.level].nr_balance_failed;
        for p in order {
            // the stopper runs on the CPU: its CFS task is not running
            if self.can_migrate_task_on(p, &mut stop_env, false) {
                self.move_task(p, env.dst_cpu);
                return;
            }
        }
    }
}

/// Tasks to move so that both groups run as many tasks per core, 0 unless the balancing CPU is
/// idle; an empty local group takes at least 2 from a busier one.
// kernel/sched/fair.c: sibling_imbalance (7ff1693236f5)
fn sibling_imbalance(env: &LbEnv, busiest: &SgStats, local: &SgStats) -> i64 {
    if env.idle == CpuIdle::NotIdle || busiest.sum_nr_running == 0 {
        return 0;
    }
    let (nb, nl) = (busiest.cores as i64, local.cores as i64);
    let (b, l) = (busiest.sum_nr_running as i64, local.sum_nr_running as i64);
    if nb == nl {
        return (b - l).max(0);
    }
    let mut imbalance = (nl * b - nb * l).max(0);
    imbalance = (2 * imbalance + nl + nb) / (nl + nb);
    if imbalance <= 1 && l == 0 && b > 1 {
        imbalance = 2;
    }
    imbalance
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kernel/sched/fair.c: need_active_balance — before e9b9734b7465 (5.12) any imbalance
    /// calls for active balancing after more than cache_nice_tries + 2 failures; from 5.12 only
    /// a task-count one (imbalanced_active_balance).
    #[test]
    fn active_balance_trigger_by_release() {
        for (version, util_kicks) in [("4.9", true), ("5.12", false)] {
            let k = crate::testutil::small_kernel(&format!("[kernel]\nversion = \"{version}\""));
            let mut env = LbEnv::for_test(&k, 2, 0, CpuIdle::Idle);
            env.nr_balance_failed = 5;
            assert!(k.need_active_balance(&env), "{version}: migrate_task");
            env.migration_type = MigrationType::Util;
            assert_eq!(k.need_active_balance(&env), util_kicks, "{version}: migrate_util");
            env.nr_balance_failed = 4;
            env.migration_type = MigrationType::Task;
            assert!(!k.need_active_balance(&env), "{version}: 4 failures are not more than 2 + 2");
        }
    }
}

//! Moving a task toward its preferred node: task_numa_migrate, task_numa_find_cpu,
//! task_numa_compare and task_numa_assign by release (kernel/sched/fair.c, spec §4.5; the
//! variants of variants.rs `task_numa_compare`). A decision is queued like the kernel's
//! stop-machine work and applied at the end of the tick.

use super::numa_stats::{load_too_imbalanced, numa_has_capacity, NodeStats, NodeType, TASK_LOAD};
use crate::kernel::Kernel;
use crate::topology::NumaTopologyType;
use crate::trace::TraceKind;
use crate::variants::{AdjustNumaImbalance, TaskNumaCompare as C};

/// Improvements below this are ping-pong (SMALLIMP, 4.19+).
const SMALLIMP: i64 = 30;

/// A queued NUMA move: `p` to `dst_cpu`, swapping with `swap` (which goes to p's CPU).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NumaMove {
    pub p: usize,
    pub src_cpu: usize,
    pub dst_cpu: usize,
    pub swap: Option<usize>,
}

/// struct task_numa_env.
struct Env {
    p: usize,
    src_cpu: usize,
    src_nid: usize,
    dst_nid: usize,
    dst_cpu: usize,
    src: NodeStats,
    dst: NodeStats,
    imbalance_pct: i64,
    imb_numa_nr: i64,
    best_task: Option<usize>,
    best_imp: i64,
    best_cpu: Option<usize>,
    /// Distance the weights are compared at (env->dist).
    dist: u32,
}

impl Kernel {
    /// Find a CPU (and maybe a task to swap with) on the preferred node, else another node
    /// the task's faults favour, and queue the move.
    // kernel/sched/fair.c: task_numa_migrate
    pub fn task_numa_migrate(&mut self, t: usize) {
        let v = self.variants().task_numa_compare;
        let Some(pref) = self.tasks[t].numa.preferred_nid else { return };
        let src_cpu = self.tasks[t].cpu;
        let src_nid = self.cpu_node(src_cpu);
        if self.numa_moves.iter().any(|m| m.p == t || m.swap == Some(t)) {
            return;
        }
        let Some(sd) = self.sd_numa(src_nid) else { return };
        let imb_numa_nr = sd.imb_numa_nr as i64;
        let pct = self.numa_env_imbalance_pct(src_nid);
        let dist = self.topo.node_distance(src_nid, pref);
        let mut env = Env {
            p: t,
            src_cpu,
            src_nid,
            dst_nid: pref,
            dst_cpu: src_cpu,
            src: self.update_numa_stats(t, src_nid, pct, false),
            dst: self.update_numa_stats(t, pref, pct, true),
            imbalance_pct: pct,
            imb_numa_nr,
            best_task: None,
            best_imp: 0,
            best_cpu: None,
            dist,
        };
        let (mut taskweight, mut groupweight) = (self.task_weight(t, src_nid, dist), self.group_weight(t, src_nid, dist));
        let taskimp = self.task_weight(t, pref, dist) - taskweight;
        let groupimp = self.group_weight(t, pref, dist) - groupweight;
        // 4.1-4.18: only a node with capacity for it
        let has_capacity = |env: &Env| v != C::V4_1 || numa_has_capacity(&env.src, &env.dst, env.imbalance_pct);
        if has_capacity(&env) {
            self.task_numa_find_cpu(&mut env, taskimp, groupimp);
        }
        let group = self.tasks[t].numa.group;
        let spread = group.is_some_and(|g| self.numa_groups[g].active_nodes > 1);
        if env.best_cpu.is_none() || spread {
            for nid in 0..self.topo.nr_nodes {
                // for_each_node_state(nid, N_CPU) (5c7b1aaf139d)
                if nid == src_nid || nid == pref || !self.topo.has_cpu(nid) {
                    continue;
                }
                // as the kernel: the distance to the node tried last, not to `nid`
                let dist = self.topo.node_distance(env.src_nid, env.dst_nid);
                if self.topo.numa_topology_type == NumaTopologyType::Backplane && dist != env.dist {
                    taskweight = self.task_weight(t, src_nid, dist);
                    groupweight = self.group_weight(t, src_nid, dist);
                }
                let taskimp = self.task_weight(t, nid, dist) - taskweight;
                let groupimp = self.group_weight(t, nid, dist) - groupweight;
                if taskimp < 0 && groupimp < 0 {
                    continue;
                }
                env.dist = dist;
                env.dst_nid = nid;
                env.dst = self.update_numa_stats(t, nid, pct, true);
                if has_capacity(&env) {
                    self.task_numa_find_cpu(&mut env, taskimp, groupimp);
                }
            }
        }
        if let Some(g) = group {
            if v >= C::V4_19 {
                // the node where a CPU was found (or stays), not a busy one
                let nid = env.best_cpu.map_or(src_nid, |c| self.cpu_node(c));
                self.trace_preferred(t, Some(nid));
                self.tasks[t].numa.preferred_nid = Some(nid);
            } else {
                // <= 4.18: the node tried last, if the group spreads and it is active
                let ng = &self.numa_groups[g];
                if ng.active_nodes > 1 && ng.is_active(self.topo.nr_nodes, env.dst_nid) {
                    self.trace_preferred(t, Some(env.dst_nid));
                    self.tasks[t].numa.preferred_nid = Some(env.dst_nid);
                }
            }
        }
        match env.best_cpu {
            Some(dst_cpu) => {
                self.numa_migrate_reset_scan_period(t);
                self.numa_moves.push(NumaMove { p: t, src_cpu, dst_cpu, swap: env.best_task })
            }
            None => self.trace_sched(TraceKind::StickNuma, t, Some(src_nid), None, None),
        }
    }

    /// Try the CPUs of env.dst_nid; from 5.7 a node with spare capacity takes a plain move to
    /// its cached idle CPU first.
    // kernel/sched/fair.c: task_numa_find_cpu
    fn task_numa_find_cpu(&mut self, env: &mut Env, taskimp: i64, groupimp: i64) {
        let v = self.variants().task_numa_compare;
        let maymove = if v < C::V4_19 {
            false
        } else if v >= C::V5_7 && env.dst.node_type == NodeType::HasSpare {
            // fb86f5b21192: would the move create an imbalance the load balancer undoes?
            let src_running = env.src.nr_running - 1;
            let dst_running = env.dst.nr_running + 1;
            let imbalance = (dst_running - src_running).max(0);
            let imbalance = match self.variants().adjust_numa_imbalance {
                AdjustNumaImbalance::V5_7 => self.adjust_numa_imbalance(imbalance, src_running, 0),
                AdjustNumaImbalance::V5_11 => self.adjust_numa_imbalance(imbalance, dst_running, env.dst.weight),
                _ => self.adjust_numa_imbalance(imbalance, dst_running, env.imb_numa_nr),
            };
            if imbalance == 0 {
                if let Some(idle) = env.dst.idle_cpu {
                    env.dst_cpu = idle;
                    self.task_numa_assign(env, None, 0);
                    return;
                }
                true
            } else {
                false
            }
        } else {
            !load_too_imbalanced(v, &env.src, &env.dst, env.imbalance_pct, env.src.load - TASK_LOAD, env.dst.load + TASK_LOAD)
        };
        let cpus = self.topo.node_cpus[env.dst_nid].clone();
        for cpu in cpus {
            if !self.tasks[env.p].allowed[cpu] {
                continue;
            }
            env.dst_cpu = cpu;
            let stop = if v < C::V4_19 { self.task_numa_compare_v3(env, taskimp, groupimp) } else { self.task_numa_compare(env, taskimp, groupimp, maymove) };
            // a0f03b617c3b (5.7): stop once a good enough candidate is found
            if stop && v >= C::V5_7 {
                break;
            }
        }
    }

    /// Record the best candidate so far. From 4.19 the target runqueue is reserved
    /// (numa_migrate_on); 5.7 looks for another idle CPU of the node if it is taken.
    // kernel/sched/fair.c: task_numa_assign
    fn task_numa_assign(&self, env: &mut Env, task: Option<usize>, imp: i64) {
        let v = self.variants().task_numa_compare;
        if v >= C::V4_19 && env.best_cpu != Some(env.dst_cpu) && self.numa_migrate_on(env.dst_cpu) {
            if v < C::V5_7 {
                return;
            }
            // 5fb52dd93a2f: find an alternative idle CPU
            let cpus = &self.topo.node_cpus[env.dst_nid];
            let start = cpus.iter().position(|&c| c == env.dst_cpu).map_or(0, |i| i + 1);
            let alt = cpus[start..].iter().chain(&cpus[..start]).copied().find(|&c| Some(c) != env.best_cpu && self.idle(c) && self.tasks[env.p].allowed[c] && !self.numa_migrate_on(c));
            match alt {
                Some(c) => env.dst_cpu = c,
                None => return,
            }
        }
        env.best_task = task;
        env.best_imp = imp;
        env.best_cpu = Some(env.dst_cpu);
    }

    /// The improvement of swapping p with `cur`, from weights: task weights within a group (or
    /// between groupless tasks), group weights between two groups.
    fn swap_imp(&self, env: &Env, cur: usize, taskimp: i64, groupimp: i64) -> i64 {
        let p_ng = self.tasks[env.p].numa.group;
        let cur_ng = self.tasks[cur].numa.group;
        let imp = if p_ng.is_some() { groupimp } else { taskimp };
        if cur_ng == p_ng {
            let mut imp = taskimp + self.task_weight(cur, env.src_nid, env.dist) - self.task_weight(cur, env.dst_nid, env.dist);
            if cur_ng.is_some() {
                imp -= imp / 16; // hysteresis inside a group
            }
            imp
        } else if cur_ng.is_some() && (p_ng.is_some() || self.variants().task_numa_compare < C::V4_19) {
            imp + self.group_weight(cur, env.src_nid, env.dist) - self.group_weight(cur, env.dst_nid, env.dist)
        } else {
            imp + self.task_weight(cur, env.src_nid, env.dist) - self.task_weight(cur, env.dst_nid, env.dist)
        }
    }

    /// <= 4.18: evaluate moving to, or swapping with the task on, env.dst_cpu.
    // kernel/sched/fair.c (3.x-4.18): task_numa_compare
    fn task_numa_compare_v3(&self, env: &mut Env, taskimp: i64, groupimp: i64) -> bool {
        let v = self.variants().task_numa_compare;
        if self.numa_migrate_on(env.dst_cpu) {
            return false; // a move decided this tick has already happened in the kernel
        }
        let cur = self.cpus[env.dst_cpu].curr();
        if cur == Some(env.p) {
            return false;
        }
        let moveimp = if self.tasks[env.p].numa.group.is_some() { groupimp } else { taskimp };
        let mut imp = moveimp;
        if let Some(c) = cur {
            if !self.tasks[c].allowed[env.src_cpu] {
                return false;
            }
            imp = self.swap_imp(env, c, taskimp, groupimp);
        }
        if imp <= env.best_imp && moveimp <= env.best_imp {
            return false;
        }
        if cur.is_none() {
            // is there capacity at our destination?
            let src_ok = if v == C::Base { env.src.has_free_capacity } else { env.src.nr_running <= env.src.task_capacity };
            if src_ok && !env.dst.has_free_capacity {
                return false;
            }
        } else if imp > env.best_imp && self.nr_running(env.src_cpu) == 1 && self.nr_running(env.dst_cpu) == 1 {
            // balance does not matter much with a task per CPU
            self.task_numa_assign(env, cur, imp);
            return false;
        }
        // the overloaded case: keep the load balanced
        let (mut src_load, mut dst_load) = (env.src.load - TASK_LOAD, env.dst.load + TASK_LOAD);
        if moveimp > imp && moveimp > env.best_imp && !load_too_imbalanced(v, &env.src, &env.dst, env.imbalance_pct, src_load, dst_load) {
            // a move beats swapping: a slightly smaller score, so that a really idle CPU wins
            self.task_numa_assign(env, None, moveimp - 1);
            return false;
        }
        if imp <= env.best_imp {
            return false;
        }
        if cur.is_some() {
            (src_load, dst_load) = (src_load + TASK_LOAD, dst_load - TASK_LOAD);
        }
        if load_too_imbalanced(v, &env.src, &env.dst, env.imbalance_pct, src_load, dst_load) {
            return false;
        }
        if cur.is_none() {
            env.dst_cpu = self.select_idle_sibling(env.p, env.src_cpu, env.dst_cpu);
        }
        self.task_numa_assign(env, cur, imp);
        false
    }

    /// 4.19+: evaluate moving to, or swapping with the task on, env.dst_cpu; true stops the
    /// search (5.7+).
    // kernel/sched/fair.c: task_numa_compare
    fn task_numa_compare(&self, env: &mut Env, taskimp: i64, groupimp: i64, maymove: bool) -> bool {
        let v = self.variants().task_numa_compare;
        if self.numa_migrate_on(env.dst_cpu) {
            return false; // dst_rq->numa_migrate_on
        }
        // C-E (6.16): a kernel thread or mm-less task counts as no task (none in the engine)
        let cur = self.cpus[env.dst_cpu].curr();
        if cur == Some(env.p) {
            return v >= C::V5_7;
        }
        let moveimp = if self.tasks[env.p].numa.group.is_some() { groupimp } else { taskimp };
        let src_nid = env.src_nid;
        let prefers_src = |t: usize| self.tasks[t].numa.preferred_nid == Some(src_nid);
        let (assign_task, imp) = 'decide: {
            let Some(cur) = cur else {
                if maymove && moveimp >= env.best_imp {
                    break 'decide (None, moveimp);
                }
                return false;
            };
            if !self.tasks[cur].allowed[env.src_cpu] {
                return false;
            }
            // 88cca72c9673: keep a best task that moves to its preferred node
            if v >= C::V5_7 && env.best_task.is_some_and(|b| prefers_src(b) && !prefers_src(cur)) {
                return false;
            }
            // 13ede3315087: no swap inside a group while the destination has spare capacity
            if v >= C::V6_0 && self.tasks[cur].numa.group == self.tasks[env.p].numa.group && env.dst.node_type == NodeType::HasSpare {
                return false;
            }
            let mut imp = self.swap_imp(env, cur, taskimp, groupimp);
            if v >= C::V5_7 {
                let cur_pref = self.tasks[cur].numa.preferred_nid;
                if cur_pref == Some(env.dst_nid) {
                    imp -= imp / 16;
                }
                if cur_pref == Some(env.src_nid) {
                    imp += imp / 8;
                }
            }
            if maymove && moveimp > imp && moveimp > env.best_imp {
                break 'decide (None, moveimp);
            }
            if v >= C::V5_7 && env.best_task.is_some_and(|b| prefers_src(cur) && !prefers_src(b)) {
                break 'decide (Some(cur), imp);
            }
            if imp < SMALLIMP || imp <= env.best_imp + SMALLIMP / 2 {
                return false;
            }
            // equal task loads: a swap leaves the load balance as it was
            (Some(cur), imp)
        };
        if assign_task.is_none() {
            env.dst_cpu = if v < C::V5_7 {
                self.select_idle_sibling(env.p, env.src_cpu, env.dst_cpu)
            } else {
                // ff7db0bf24db: the idle CPU update_numa_stats cached
                let cpu = env.dst.idle_cpu.unwrap_or(env.dst_cpu);
                match env.best_cpu {
                    Some(b) if !self.idle(cpu) && self.idle(b) => b,
                    _ => cpu,
                }
            };
        }
        self.task_numa_assign(env, assign_task, imp);
        if v < C::V5_7 {
            return false;
        }
        let best_idle = env.best_cpu.is_some_and(|c| self.idle(c));
        (maymove && assign_task.is_none() && best_idle) || (!maymove && env.best_task.is_some_and(prefers_src))
    }

    /// Apply the moves queued this tick (migrate_task_to / migrate_swap via stop-machine).
    // kernel/sched/core.c: migrate_swap, kernel/sched/fair.c: migrate_task_to
    pub fn apply_numa_moves(&mut self) {
        for m in std::mem::take(&mut self.numa_moves) {
            let on_src = |k: &Kernel, t: usize, cpu: usize| k.tasks[t].runnable() && k.tasks[t].cpu == cpu;
            if !on_src(self, m.p, m.src_cpu) {
                continue;
            }
            let (src_nid, dst_nid) = (Some(self.cpu_node(m.src_cpu)), Some(self.cpu_node(m.dst_cpu)));
            match m.swap {
                Some(s) if on_src(self, s, m.dst_cpu) => {
                    self.trace_sched(TraceKind::SwapNuma, m.p, src_nid, dst_nid, Some(s));
                    self.move_task(m.p, m.dst_cpu);
                    self.move_task(s, m.src_cpu);
                }
                Some(s) => self.trace_sched(TraceKind::StickNuma, m.p, src_nid, dst_nid, Some(s)),
                None => {
                    self.trace_sched(TraceKind::MoveNuma, m.p, src_nid, dst_nid, None);
                    self.move_task(m.p, m.dst_cpu)
                }
            }
        }
    }
}

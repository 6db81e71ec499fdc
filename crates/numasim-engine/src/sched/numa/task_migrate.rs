//! Moving a task toward its preferred node: task_numa_migrate, task_numa_find_cpu and
//! task_numa_compare (kernel/sched/fair.c, spec §4.5). A decision is queued like the kernel's
//! stop-machine work and applied at the end of the tick.

use super::fault::{task_faults_idx, NUMA_MEM};
use crate::kernel::Kernel;

/// Improvements below this are ping-pong (SMALLIMP).
const SMALLIMP: i64 = 30;
/// Running-task imbalance the NUMA domain tolerates (adjust_numa_imbalance).
const NUMA_IMBALANCE_MIN: i64 = 2;

/// A queued NUMA move: `p` to `dst_cpu`, swapping with `swap` (which goes to p's CPU).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NumaMove {
    pub p: usize,
    pub src_cpu: usize,
    pub dst_cpu: usize,
    pub swap: Option<usize>,
}

/// update_numa_stats for one node: running tasks, CPUs, an idle CPU.
#[derive(Debug, Clone, Copy)]
struct NodeStats {
    nr_running: i64,
    capacity: i64,
    idle_cpu: Option<usize>,
}

impl NodeStats {
    fn has_spare(&self) -> bool {
        self.nr_running < self.capacity
    }
}

struct Env {
    p: usize,
    src_cpu: usize,
    src_nid: usize,
    dst_nid: usize,
    dst_cpu: usize,
    src: NodeStats,
    dst: NodeStats,
    best_task: Option<usize>,
    best_imp: i64,
    best_cpu: Option<usize>,
}

impl Kernel {
    // kernel/sched/fair.c: update_numa_stats
    fn update_numa_stats(&self, nid: usize) -> NodeStats {
        let cpus = &self.topo.node_cpus[nid];
        let busy = |c: usize| !self.cpus[c].rq.is_empty() || self.numa_moves.iter().any(|m| m.dst_cpu == c);
        NodeStats { nr_running: cpus.iter().map(|&c| self.cpus[c].rq.len() as i64).sum(), capacity: cpus.len() as i64, idle_cpu: cpus.iter().copied().find(|&c| !busy(c)) }
    }

    /// 1000 * the task's memory faults on `nid` / its total (task_weight).
    // kernel/sched/fair.c: task_weight
    pub fn task_weight(&self, t: usize, nid: usize) -> i64 {
        let p = &self.tasks[t].numa;
        if p.faults.is_empty() || p.total_faults <= 0 {
            return 0;
        }
        let nr = self.topo.nr_nodes;
        let f = p.faults[task_faults_idx(nr, NUMA_MEM, nid, 0)] + p.faults[task_faults_idx(nr, NUMA_MEM, nid, 1)];
        1000 * f / p.total_faults
    }

    /// 1000 * the group's memory faults on `nid` / its total (group_weight).
    // kernel/sched/fair.c: group_weight
    pub fn group_weight(&self, t: usize, nid: usize) -> i64 {
        let Some(g) = self.tasks[t].numa.group else { return 0 };
        let ng = &self.numa_groups[g];
        if ng.total_faults <= 0 {
            return 0;
        }
        1000 * ng.faults_mem(self.topo.nr_nodes, nid) / ng.total_faults
    }

    // kernel/sched/fair.c: load_too_imbalanced (load = running tasks)
    fn load_too_imbalanced(env: &Env, src_load: i64, dst_load: i64) -> bool {
        let (sc, dc) = (env.src.capacity, env.dst.capacity);
        let imb = (dst_load * sc - src_load * dc).abs();
        let old_imb = (env.dst.nr_running * sc - env.src.nr_running * dc).abs();
        imb > old_imb
    }

    /// Find a CPU (and maybe a task to swap with) on the preferred node and queue the move.
    // kernel/sched/fair.c: task_numa_migrate
    pub fn task_numa_migrate(&mut self, t: usize) {
        let Some(pref) = self.tasks[t].numa.preferred_nid else { return };
        let src_cpu = self.tasks[t].cpu;
        let src_nid = self.cpu_node(src_cpu);
        if self.numa_moves.iter().any(|m| m.p == t || m.swap == Some(t)) {
            return;
        }
        let mut env =
            Env { p: t, src_cpu, src_nid, dst_nid: pref, dst_cpu: src_cpu, src: self.update_numa_stats(src_nid), dst: self.update_numa_stats(pref), best_task: None, best_imp: 0, best_cpu: None };
        let (taskweight, groupweight) = (self.task_weight(t, src_nid), self.group_weight(t, src_nid));
        let taskimp = self.task_weight(t, pref) - taskweight;
        let groupimp = self.group_weight(t, pref) - groupweight;
        self.task_numa_find_cpu(&mut env, taskimp, groupimp);
        let group = self.tasks[t].numa.group;
        let spread = group.is_some_and(|g| self.numa_groups[g].active_nodes > 1);
        if env.best_cpu.is_none() || spread {
            for nid in 0..self.topo.nr_nodes {
                if nid == src_nid || nid == pref {
                    continue;
                }
                let taskimp = self.task_weight(t, nid) - taskweight;
                let groupimp = self.group_weight(t, nid) - groupweight;
                if taskimp < 0 && groupimp < 0 {
                    continue;
                }
                env.dst_nid = nid;
                env.dst = self.update_numa_stats(nid);
                self.task_numa_find_cpu(&mut env, taskimp, groupimp);
            }
        }
        if group.is_some() {
            // a grouped task prefers the node where a CPU was found (or stays), not a busy one
            self.tasks[t].numa.preferred_nid = Some(env.best_cpu.map_or(src_nid, |c| self.cpu_node(c)));
        }
        if let Some(dst_cpu) = env.best_cpu {
            self.numa_moves.push(NumaMove { p: t, src_cpu, dst_cpu, swap: env.best_task });
        }
    }

    // kernel/sched/fair.c: task_numa_find_cpu
    fn task_numa_find_cpu(&mut self, env: &mut Env, taskimp: i64, groupimp: i64) {
        let maymove = if env.dst.has_spare() {
            let src_running = env.src.nr_running - 1;
            let dst_running = env.dst.nr_running + 1;
            let mut imbalance = (dst_running - src_running).max(0);
            // adjust_numa_imbalance: small imbalances are allowed while the node is lightly used
            if dst_running <= self.topo.nr_nodes as i64 && imbalance <= NUMA_IMBALANCE_MIN {
                imbalance = 0;
            }
            if imbalance == 0 {
                if let Some(idle) = env.dst.idle_cpu.filter(|&c| self.tasks[env.p].allowed[c]) {
                    env.dst_cpu = idle;
                    Self::task_numa_assign(env, None, 0);
                    return;
                }
                true
            } else {
                false
            }
        } else {
            !Self::load_too_imbalanced(env, env.src.nr_running - 1, env.dst.nr_running + 1)
        };
        let cpus = self.topo.node_cpus[env.dst_nid].clone();
        for cpu in cpus {
            if !self.tasks[env.p].allowed[cpu] {
                continue;
            }
            env.dst_cpu = cpu;
            if self.task_numa_compare(env, taskimp, groupimp, maymove) {
                break;
            }
        }
    }

    fn task_numa_assign(env: &mut Env, task: Option<usize>, imp: i64) {
        env.best_task = task;
        env.best_imp = imp;
        env.best_cpu = Some(env.dst_cpu);
    }

    /// Evaluate moving to, or swapping with the task on, `env.dst_cpu`; true stops the search.
    // kernel/sched/fair.c: task_numa_compare
    fn task_numa_compare(&self, env: &mut Env, taskimp: i64, groupimp: i64, maymove: bool) -> bool {
        if self.numa_moves.iter().any(|m| m.dst_cpu == env.dst_cpu || m.src_cpu == env.dst_cpu) {
            return false; // dst_rq->numa_migrate_on
        }
        let p_ng = self.tasks[env.p].numa.group;
        let mut imp = if p_ng.is_some() { groupimp } else { taskimp };
        let moveimp = imp;
        let cur = self.cpus[env.dst_cpu].curr();
        if cur == Some(env.p) {
            return true;
        }
        let Some(cur) = cur else {
            // an idle CPU
            if maymove && moveimp >= env.best_imp {
                Self::task_numa_assign(env, None, moveimp);
                return true;
            }
            return false;
        };
        if !self.tasks[cur].allowed[env.src_cpu] || self.numa_moves.iter().any(|m| m.p == cur || m.swap == Some(cur)) {
            return false;
        }
        let cur_pref = self.tasks[cur].numa.preferred_nid;
        if let Some(b) = env.best_task {
            if self.tasks[b].numa.preferred_nid == Some(env.src_nid) && cur_pref != Some(env.src_nid) {
                return false;
            }
        }
        let cur_ng = self.tasks[cur].numa.group;
        if cur_ng == p_ng {
            // no swap inside a group (or between groupless tasks) while dst has spare capacity
            if env.dst.has_spare() {
                return false;
            }
            imp = taskimp + self.task_weight(cur, env.src_nid) - self.task_weight(cur, env.dst_nid);
            if cur_ng.is_some() {
                imp -= imp / 16;
            }
        } else if cur_ng.is_some() && p_ng.is_some() {
            imp += self.group_weight(cur, env.src_nid) - self.group_weight(cur, env.dst_nid);
        } else {
            imp += self.task_weight(cur, env.src_nid) - self.task_weight(cur, env.dst_nid);
        }
        if cur_pref == Some(env.dst_nid) {
            imp -= imp / 16;
        }
        if cur_pref == Some(env.src_nid) {
            imp += imp / 8;
        }
        if maymove && moveimp > imp && moveimp > env.best_imp {
            // moving beats swapping, but only to an idle CPU (there is none here)
            return false;
        }
        let src_nid = env.src_nid;
        let prefers_src = |t: usize| self.tasks[t].numa.preferred_nid == Some(src_nid);
        let better_pick = env.best_task.is_some_and(|b| prefers_src(cur) && !prefers_src(b));
        if !better_pick && (imp < SMALLIMP || imp <= env.best_imp + SMALLIMP / 2) {
            return false;
        }
        // equal task loads: a swap leaves the load balance as it was
        Self::task_numa_assign(env, Some(cur), imp);
        !maymove && prefers_src(cur)
    }

    /// Apply the moves queued this tick (migrate_task_to / migrate_swap via stop-machine).
    // kernel/sched/core.c: migrate_swap, kernel/sched/fair.c: migrate_task_to
    pub fn apply_numa_moves(&mut self) {
        for m in std::mem::take(&mut self.numa_moves) {
            let on_src = |k: &Kernel, t: usize, cpu: usize| k.tasks[t].runnable() && k.tasks[t].cpu == cpu;
            if !on_src(self, m.p, m.src_cpu) {
                continue;
            }
            match m.swap {
                Some(s) if on_src(self, s, m.dst_cpu) => {
                    self.move_task(m.p, m.dst_cpu);
                    self.move_task(s, m.src_cpu);
                }
                Some(_) => {}
                None => self.move_task(m.p, m.dst_cpu),
            }
        }
    }
}

//! Moving a task toward its preferred node: task_numa_migrate, task_numa_find_cpu and
//! task_numa_compare (kernel/sched/fair.c, spec §4.5). A decision is queued like the kernel's
//! stop-machine work and applied at the end of the tick.

use super::fault::{task_faults_idx, NUMA_MEM};
use crate::kernel::Kernel;
use crate::topology::{NumaTopologyType, LOCAL_DISTANCE};
use crate::trace::TraceKind;

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
    /// Distance the weights are compared at (env->dist).
    dist: u32,
}

impl Kernel {
    // kernel/sched/fair.c: update_numa_stats
    fn update_numa_stats(&self, nid: usize) -> NodeStats {
        let cpus = &self.topo.node_cpus[nid];
        let busy = |c: usize| !self.cpus[c].rq.is_empty() || self.numa_moves.iter().any(|m| m.dst_cpu == c);
        NodeStats { nr_running: cpus.iter().map(|&c| self.cpus[c].rq.len() as i64).sum(), capacity: cpus.len() as i64, idle_cpu: cpus.iter().copied().find(|&c| !busy(c)) }
    }

    /// The task's (`task`) or its group's memory faults on `nid`, both fault types summed.
    // kernel/sched/fair.c: task_faults, group_faults
    fn node_faults(&self, t: usize, nid: usize, task: bool) -> i64 {
        let nr = self.topo.nr_nodes;
        if task {
            let f = &self.tasks[t].numa.faults;
            if f.is_empty() {
                return 0;
            }
            f[task_faults_idx(nr, NUMA_MEM, nid, 0)] + f[task_faults_idx(nr, NUMA_MEM, nid, 1)]
        } else {
            self.tasks[t].numa.group.map_or(0, |g| self.numa_groups[g].faults_mem(nr, nid))
        }
    }

    /// Faults on the nodes near `nid` that count toward it on a topology that is not directly
    /// connected: on a glueless mesh each node's faults scaled down with its distance, on a
    /// backplane those of the nodes closer than `lim_dist`; never the furthest nodes.
    // kernel/sched/fair.c: score_nearby_nodes
    pub fn score_nearby_nodes(&self, t: usize, nid: usize, lim_dist: u32, task: bool) -> i64 {
        let topo = &self.topo;
        if topo.numa_topology_type == NumaTopologyType::Direct {
            return 0;
        }
        let max_dist = topo.max_numa_distance;
        let mut score = 0;
        for node in 0..topo.nr_nodes {
            let dist = topo.node_distance(nid, node);
            if dist >= max_dist || node == nid {
                continue;
            }
            if topo.numa_topology_type == NumaTopologyType::Backplane && dist >= lim_dist {
                continue;
            }
            let mut faults = self.node_faults(t, node, task);
            if topo.numa_topology_type == NumaTopologyType::GluelessMesh {
                faults = faults * (max_dist - dist) as i64 / (max_dist - LOCAL_DISTANCE) as i64;
            }
            score += faults;
        }
        score
    }

    /// 1000 * the task's memory faults on `nid` (and, by `dist`, nodes near it) / its total.
    // kernel/sched/fair.c: task_weight
    pub fn task_weight(&self, t: usize, nid: usize, dist: u32) -> i64 {
        let p = &self.tasks[t].numa;
        if p.faults.is_empty() || p.total_faults <= 0 {
            return 0;
        }
        let f = self.node_faults(t, nid, true) + self.score_nearby_nodes(t, nid, dist, true);
        1000 * f / p.total_faults
    }

    /// 1000 * the group's memory faults on `nid` (and, by `dist`, nodes near it) / its total.
    // kernel/sched/fair.c: group_weight
    pub fn group_weight(&self, t: usize, nid: usize, dist: u32) -> i64 {
        let Some(g) = self.tasks[t].numa.group else { return 0 };
        let total = self.numa_groups[g].total_faults;
        if total <= 0 {
            return 0;
        }
        let f = self.node_faults(t, nid, false) + self.score_nearby_nodes(t, nid, dist, false);
        1000 * f / total
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
        let dist = self.topo.node_distance(src_nid, pref);
        let mut env = Env {
            p: t,
            src_cpu,
            src_nid,
            dst_nid: pref,
            dst_cpu: src_cpu,
            src: self.update_numa_stats(src_nid),
            dst: self.update_numa_stats(pref),
            best_task: None,
            best_imp: 0,
            best_cpu: None,
            dist,
        };
        let (mut taskweight, mut groupweight) = (self.task_weight(t, src_nid, dist), self.group_weight(t, src_nid, dist));
        let taskimp = self.task_weight(t, pref, dist) - taskweight;
        let groupimp = self.group_weight(t, pref, dist) - groupweight;
        self.task_numa_find_cpu(&mut env, taskimp, groupimp);
        let group = self.tasks[t].numa.group;
        let spread = group.is_some_and(|g| self.numa_groups[g].active_nodes > 1);
        if env.best_cpu.is_none() || spread {
            for nid in 0..self.topo.nr_nodes {
                if nid == src_nid || nid == pref {
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
                env.dst = self.update_numa_stats(nid);
                self.task_numa_find_cpu(&mut env, taskimp, groupimp);
            }
        }
        if group.is_some() {
            // a grouped task prefers the node where a CPU was found (or stays), not a busy one
            self.tasks[t].numa.preferred_nid = Some(env.best_cpu.map_or(src_nid, |c| self.cpu_node(c)));
        }
        match env.best_cpu {
            Some(dst_cpu) => {
                self.numa_migrate_reset_scan_period(t);
                self.numa_moves.push(NumaMove { p: t, src_cpu, dst_cpu, swap: env.best_task })
            }
            None => self.trace_sched(TraceKind::StickNuma, t, Some(src_nid), None, None),
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
            imp = taskimp + self.task_weight(cur, env.src_nid, env.dist) - self.task_weight(cur, env.dst_nid, env.dist);
            if cur_ng.is_some() {
                imp -= imp / 16;
            }
        } else if cur_ng.is_some() && p_ng.is_some() {
            imp += self.group_weight(cur, env.src_nid, env.dist) - self.group_weight(cur, env.dst_nid, env.dist);
        } else {
            imp += self.task_weight(cur, env.src_nid, env.dist) - self.task_weight(cur, env.dst_nid, env.dist);
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

#[cfg(test)]
mod tests {
    use super::super::fault::{task_faults_idx, NUMA_MEM};
    use super::super::group::NumaGroup;
    use crate::kernel::Kernel;
    use crate::testutil::{small_kernel_from, thread, SMALL};

    /// SMALL on 4 nodes of 2 CPUs with SLIT `distances`.
    pub fn four_nodes(distances: &str) -> Kernel {
        let text = SMALL
            .replace("nodes = 2", "nodes = 4")
            .replace("distances = [[10, 21], [21, 10]]", &format!("distances = {distances}"))
            .replace("stream_gibps = [[2.0, 1.4], [1.4, 2.0]]", "stream_gibps = [[2.0, 1.4, 1.4, 1.4], [1.4, 2.0, 1.4, 1.4], [1.4, 1.4, 2.0, 1.4], [1.4, 1.4, 1.4, 2.0]]")
            .replace(
                "latency_ns = [[100.0, 180.0], [180.0, 100.0]]",
                "latency_ns = [[100.0, 180.0, 180.0, 180.0], [180.0, 100.0, 180.0, 180.0], [180.0, 180.0, 100.0, 180.0], [180.0, 180.0, 180.0, 100.0]]",
            )
            .replace("node_bandwidth_gibps = [100.0, 100.0]", "node_bandwidth_gibps = [100.0, 100.0, 100.0, 100.0]");
        small_kernel_from(&text)
    }

    pub const DIRECT: &str = "[[10, 20, 20, 20], [20, 10, 20, 20], [20, 20, 10, 20], [20, 20, 20, 10]]";
    /// Four sockets in a ring: 0 and 2 (1 and 3) are two hops apart.
    pub const MESH: &str = "[[10, 20, 30, 20], [20, 10, 20, 30], [30, 20, 10, 20], [20, 30, 20, 10]]";
    /// Two sockets of two nodes each (as AMD EPYC with NPS2): 12 within a socket, 32 across.
    pub const BACKPLANE: &str = "[[10, 12, 32, 32], [12, 10, 32, 32], [32, 32, 10, 12], [32, 32, 12, 10]]";

    /// Give task `t` private memory faults per node, and the same as a group of its own.
    fn set_faults(k: &mut Kernel, t: usize, per_node: [i64; 4]) {
        let nr = k.topo.nr_nodes;
        let mut f = vec![0; 8 * nr];
        for (nid, &n) in per_node.iter().enumerate() {
            f[task_faults_idx(nr, NUMA_MEM, nid, 1)] = n;
        }
        let total = per_node.iter().sum();
        k.numa_groups.push(NumaGroup { gid: k.tasks[t].pid, refcount: 1, nr_tasks: 1, faults: f[..4 * nr].to_vec(), total_faults: total, max_faults_cpu: 0, active_nodes: 1 });
        k.tasks[t].numa.group = Some(k.numa_groups.len() - 1);
        (k.tasks[t].numa.faults, k.tasks[t].numa.total_faults) = (f, total);
    }

    /// A 4-node kernel with SLIT `slit` whose first thread has `faults` (see `set_faults`).
    fn with_faults(slit: &str, faults: [i64; 4]) -> (Kernel, usize) {
        let mut k = four_nodes(slit);
        let t = thread(&k, 0);
        set_faults(&mut k, t, faults);
        (k, t)
    }

    /// kernel/sched/fair.c: score_nearby_nodes — nothing on a direct topology; on a glueless
    /// mesh a node's neighbours count by (max - dist) / (max - LOCAL_DISTANCE); on a backplane
    /// those closer than the compared distance count whole; the furthest nodes never count.
    #[test]
    fn task_weight_counts_nearby_nodes_by_topology() {
        let faults = [100, 50, 0, 50];
        let (direct, t) = with_faults(DIRECT, faults);
        assert_eq!((direct.task_weight(t, 0, 20), direct.task_weight(t, 2, 20)), (500, 0));
        let (mesh, _) = with_faults(MESH, faults);
        // node 0: 100 + 50 * 10/20 (node 1) + 50 * 10/20 (node 3); node 2: its neighbours 1, 3
        assert_eq!((mesh.task_weight(t, 0, 30), mesh.task_weight(t, 2, 30)), (750, 250));
        assert_eq!(mesh.group_weight(t, 0, 30), 750, "groups score alike");
        let (backplane, _) = with_faults(BACKPLANE, faults);
        assert_eq!(backplane.task_weight(t, 0, 32), 750, "node 1 (12 away) is in node 0's group at 32");
        assert_eq!(backplane.task_weight(t, 0, 12), 500, "comparing at 12, node 1 is not nearer than that");
        assert_eq!(backplane.task_weight(t, 2, 32), 250, "nodes 0 and 1 are the furthest: never counted");
    }

    /// kernel/sched/fair.c: preferred_group_nid — the busiest node stands on a direct topology;
    /// a glueless mesh takes the best group_weight at the largest distance; a backplane picks the
    /// busiest group of nodes first, then the busiest node in it.
    #[test]
    fn preferred_group_nid_follows_the_topology() {
        let faults = [30, 30, 50, 0];
        let (direct, t) = with_faults(DIRECT, faults);
        assert_eq!(direct.preferred_group_nid(t, 2), 2);
        let (mesh, _) = with_faults(MESH, faults);
        // scores: node 0 30+15+0, node 1 30+15+25, node 2 50+15+0, node 3 0+15+25
        assert_eq!(mesh.preferred_group_nid(t, 2), 1);
        let (mut backplane, _) = with_faults(BACKPLANE, faults);
        // socket {0, 1} holds 60 faults against 50: its first busiest node wins
        assert_eq!(backplane.preferred_group_nid(t, 2), 0);
        set_faults(&mut backplane, t, [10, 30, 50, 0]);
        assert_eq!(backplane.preferred_group_nid(t, 2), 2, "socket {{2, 3}} now holds more");
        set_faults(&mut backplane, t, [10, 50, 50, 0]);
        assert_eq!(backplane.preferred_group_nid(t, 2), 1, "then node 1 inside socket {{0, 1}}");
    }
}

//! How much of a task's (or its numa_group's) memory faults a node holds, and the nodes near it
//! on a topology that is not directly connected (kernel/sched/fair.c: task_faults,
//! group_faults, score_nearby_nodes, task_weight, group_weight).

use super::fault::{task_faults_idx, NUMA_MEM};
use crate::kernel::Kernel;
use crate::topology::{NumaTopologyType, LOCAL_DISTANCE};

impl Kernel {
    /// The task's (`task`) or its group's memory faults on `nid`, both fault types summed.
    // kernel/sched/fair.c: task_faults, group_faults
    pub(crate) fn node_faults(&self, t: usize, nid: usize, task: bool) -> i64 {
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
            .replace("touch_gibps = [[2.0, 1.4], [1.4, 2.0]]", "touch_gibps = [[2.0, 1.4, 1.4, 1.4], [1.4, 2.0, 1.4, 1.4], [1.4, 1.4, 2.0, 1.4], [1.4, 1.4, 1.4, 2.0]]")
            .replace("page_store_gibps = [[2.0, 1.4], [1.4, 2.0]]", "page_store_gibps = [[2.0, 1.4, 1.4, 1.4], [1.4, 2.0, 1.4, 1.4], [1.4, 1.4, 2.0, 1.4], [1.4, 1.4, 1.4, 2.0]]")
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

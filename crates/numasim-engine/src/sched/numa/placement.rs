//! Preferred-node choice once per scan pass (kernel/sched/fair.c, spec §4.4-4.5).

use super::fault::{task_faults_idx, NUMA_CPU, NUMA_CPUBUF, NUMA_MEM, NUMA_MEMBUF};
use crate::kernel::Kernel;
use crate::topology::{NumaTopologyType, LOCAL_DISTANCE};

/// LOAD_AVG_MAX (kernel/sched/sched-pelt.h): the PELT sum of an always-running entity.
const LOAD_AVG_MAX: u64 = 47742;

impl Kernel {
    // kernel/sched/fair.c: numa_get_avg_runtime
    fn numa_get_avg_runtime(&mut self, t: usize) -> (u64, u64) {
        let now = self.now;
        let p = &mut self.tasks[t];
        let runtime = p.sum_exec_runtime;
        let (delta, period) =
            if p.numa.last_task_numa_placement != 0 { (runtime - p.numa.last_sum_exec_runtime, now.saturating_sub(p.numa.last_task_numa_placement)) } else { (LOAD_AVG_MAX, LOAD_AVG_MAX) };
        p.numa.last_sum_exec_runtime = runtime;
        p.numa.last_task_numa_placement = now;
        (delta, period)
    }

    /// Decay the fault statistics, pick the preferred node, adapt the scan period.
    // kernel/sched/fair.c: task_numa_placement
    pub fn task_numa_placement(&mut self, t: usize) {
        let mm = self.tasks[t].mm;
        let seq = self.numa_scan_seq_seen(mm);
        if self.tasks[t].numa.scan_seq == seq {
            return;
        }
        self.tasks[t].numa.scan_seq = seq;
        self.tasks[t].numa.scan_period_max = self.task_scan_max(t);
        let (runtime, period) = self.numa_get_avg_runtime(t);
        let nr = self.topo.nr_nodes;
        let group = self.tasks[t].numa.group;
        let p = &mut self.tasks[t].numa;
        let total = p.faults_locality[0] + p.faults_locality[1];
        let mut fault_types = [0u64; 2];
        let (mut max_faults, mut max_nid) = (0i64, None);
        for nid in 0..nr {
            let (mut faults, mut group_faults) = (0i64, 0i64);
            for private in 0..2 {
                let mem = task_faults_idx(nr, NUMA_MEM, nid, private);
                let membuf = task_faults_idx(nr, NUMA_MEMBUF, nid, private);
                let cpu = task_faults_idx(nr, NUMA_CPU, nid, private);
                let cpubuf = task_faults_idx(nr, NUMA_CPUBUF, nid, private);
                let diff = p.faults[membuf] - p.faults[mem] / 2;
                fault_types[private] += p.faults[membuf] as u64;
                p.faults[membuf] = 0;
                let f_weight = ((runtime << 16) / (period + 1)) as i64 * p.faults[cpubuf] / (total as i64 + 1);
                let f_diff = f_weight - p.faults[cpu] / 2;
                p.faults[cpubuf] = 0;
                p.faults[mem] += diff;
                p.faults[cpu] += f_diff;
                p.total_faults += diff;
                faults += p.faults[mem];
                if let Some(g) = group {
                    let ng = &mut self.numa_groups[g];
                    ng.faults[mem] += diff;
                    ng.faults[cpu] += f_diff;
                    ng.total_faults += diff;
                    group_faults += ng.faults[mem];
                }
            }
            let f = if group.is_some() { group_faults } else { faults };
            if f > max_faults {
                max_faults = f;
                max_nid = Some(nid);
            }
        }
        // 5c7b1aaf139d (5.17, recalled): a CPU-less node cannot be preferred; its nearest CPU
        // node is
        max_nid = max_nid.map(|nid| self.topo.nearest_cpu_node(nid));
        if let Some(g) = group {
            self.numa_groups[g].count_active_nodes(nr);
            max_nid = max_nid.map(|nid| self.preferred_group_nid(t, nid));
        }
        if max_faults > 0 && max_nid != self.tasks[t].numa.preferred_nid {
            // sched_setnuma
            self.trace_preferred(t, max_nid);
            self.tasks[t].numa.preferred_nid = max_nid;
        }
        self.update_task_scan_period(t, fault_types[0], fault_types[1]);
    }

    /// The preferred node of a grouped task: `nid` (the group's busiest node) when all nodes
    /// are directly connected; else the node whose neighbourhood holds most group faults (a
    /// glueless mesh), or the busiest node inside the busiest group of nodes, searched from
    /// the largest distance down (a backplane).
    // kernel/sched/fair.c: preferred_group_nid
    pub fn preferred_group_nid(&self, t: usize, mut nid: usize) -> usize {
        let topo = &self.topo;
        match topo.numa_topology_type {
            NumaTopologyType::Direct => nid,
            NumaTopologyType::GluelessMesh => {
                let (mut max_score, mut max_node) = (0, nid);
                for node in 0..topo.nr_nodes {
                    let score = self.group_weight(t, node, topo.max_numa_distance);
                    if score > max_score {
                        (max_score, max_node) = (score, node);
                    }
                }
                max_node
            }
            NumaTopologyType::Backplane => {
                let Some(g) = self.tasks[t].numa.group else { return nid };
                let group_faults = |n: usize| self.numa_groups[g].faults_mem(topo.nr_nodes, n);
                let mut nodes: Vec<usize> = (0..topo.nr_nodes).collect();
                for dist in (LOCAL_DISTANCE + 1..=topo.max_numa_distance).rev() {
                    if !topo.find_numa_distance(dist) {
                        continue;
                    }
                    let (mut max_faults, mut max_group) = (0, Vec::new());
                    let mut left = nodes.clone();
                    for &a in &nodes {
                        if !left.contains(&a) {
                            continue;
                        }
                        // the nodes still unclaimed within `dist` of a, a itself included
                        let (this_group, rest): (Vec<usize>, Vec<usize>) = left.iter().partition(|&&b| topo.node_distance(a, b) < dist);
                        left = rest;
                        let faults: i64 = this_group.iter().map(|&b| group_faults(b)).sum();
                        if faults > max_faults {
                            (max_faults, max_group, nid) = (faults, this_group, a);
                        }
                    }
                    if max_faults == 0 {
                        break;
                    }
                    nodes = max_group;
                }
                nid
            }
        }
    }

    /// Periodically try to move the task to its preferred node.
    // kernel/sched/fair.c: numa_migrate_preferred
    pub fn numa_migrate_preferred(&mut self, t: usize) {
        let p = &self.tasks[t].numa;
        let Some(pref) = p.preferred_nid else { return };
        if p.faults.is_empty() {
            return;
        }
        let interval = (1_000_000_000u64).min(p.scan_period as u64 * 1_000_000 / 16);
        self.tasks[t].numa.migrate_retry = self.now + interval;
        if self.task_node(t) != pref {
            self.task_numa_migrate(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::sched::numa::fault::cpu_pid_to_cpupid;
    use crate::testutil::{pin, small_kernel, thread};

    /// kernel/sched/fair.c: task_numa_placement — runs once per completed scan pass and prefers
    /// the node holding most of the task's memory faults.
    #[test]
    fn preferred_node_follows_memory_faults_once_per_pass() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        pin(&mut k, t, 0);
        let pid = k.tasks[t].pid;
        k.tasks[t].numa.migrate_retry = u64::MAX;
        for _ in 0..3 {
            k.task_numa_fault(t, cpu_pid_to_cpupid(0, pid), 1, 1, 0);
        }
        k.task_numa_fault(t, cpu_pid_to_cpupid(0, pid), 0, 1, 0);
        k.task_numa_placement(t);
        assert_eq!(k.tasks[t].numa.preferred_nid, None, "same scan seq: nothing to do");
        k.mms[0].numa_scan_seq += 1;
        k.task_numa_placement(t);
        assert_eq!(k.tasks[t].numa.preferred_nid, Some(1));
    }
}

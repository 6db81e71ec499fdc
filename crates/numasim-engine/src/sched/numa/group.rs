//! numa_group: tasks that share memory pool their fault statistics (kernel/sched/fair.c,
//! spec §4.3-4.4).

use super::fault::{cpupid_match_pid, cpupid_to_cpu, task_faults_idx, NUMA_CPU, NUMA_MEM, TNF_SHARED};
use crate::features::Feature;
use crate::kernel::Kernel;

/// A node is active in a group if its CPU faults exceed 1/3 of the busiest node's.
pub const ACTIVE_NODE_FRACTION: i64 = 3;

/// struct numa_group: the MEM and CPU regions of the members' numa_faults, summed.
#[derive(Debug, Clone)]
pub struct NumaGroup {
    pub gid: u32,
    pub refcount: u32,
    pub nr_tasks: u32,
    /// faults[task_faults_idx(nodes, NUMA_MEM | NUMA_CPU, nid, priv)]
    pub faults: Vec<i64>,
    pub total_faults: i64,
    pub max_faults_cpu: i64,
    pub active_nodes: usize,
}

impl NumaGroup {
    // kernel/sched/fair.c: group_faults_cpu
    pub fn faults_cpu(&self, nr_nodes: usize, nid: usize) -> i64 {
        self.faults[task_faults_idx(nr_nodes, NUMA_CPU, nid, 0)] + self.faults[task_faults_idx(nr_nodes, NUMA_CPU, nid, 1)]
    }

    // kernel/sched/fair.c: group_faults (the MEM region)
    pub fn faults_mem(&self, nr_nodes: usize, nid: usize) -> i64 {
        self.faults[task_faults_idx(nr_nodes, NUMA_MEM, nid, 0)] + self.faults[task_faults_idx(nr_nodes, NUMA_MEM, nid, 1)]
    }

    /// Shared and private memory faults over all nodes (group_faults_shared / _priv).
    pub fn shared_private(&self, nr_nodes: usize) -> (i64, i64) {
        (0..nr_nodes).fold((0, 0), |(s, p), n| (s + self.faults[task_faults_idx(nr_nodes, NUMA_MEM, n, 0)], p + self.faults[task_faults_idx(nr_nodes, NUMA_MEM, n, 1)]))
    }

    // kernel/sched/fair.c: numa_group_count_active_nodes
    pub fn count_active_nodes(&mut self, nr_nodes: usize) {
        let max = (0..nr_nodes).map(|n| self.faults_cpu(nr_nodes, n)).max().unwrap_or(0);
        self.max_faults_cpu = max;
        self.active_nodes = (0..nr_nodes).filter(|&n| self.faults_cpu(nr_nodes, n) * ACTIVE_NODE_FRACTION > max).count();
    }

    /// Whether `nid` is one of the group's active nodes (kernel/sched/fair.c: node_is_active...).
    pub fn is_active(&self, nr_nodes: usize, nid: usize) -> bool {
        self.faults_cpu(nr_nodes, nid) * ACTIVE_NODE_FRACTION > self.max_faults_cpu
    }
}

impl Kernel {
    /// Length of the MEM and CPU regions of numa_faults (NR_NUMA_HINT_FAULT_STATS * nodes).
    fn group_stats_len(&self) -> usize {
        4 * self.topo.nr_nodes
    }

    /// A shared fault: join the group of the task that last touched the page, if it is running
    /// there now and its group is at least as big. Returns the fault's `priv` (false unless a
    /// PID collision between unrelated tasks is detected).
    // kernel/sched/fair.c: task_numa_group
    pub fn task_numa_group(&mut self, t: usize, cpupid: u32, flags: u32) -> bool {
        let len = self.group_stats_len();
        if self.tasks[t].numa.group.is_none() {
            let faults = if self.tasks[t].numa.faults.is_empty() { vec![0; len] } else { self.tasks[t].numa.faults[..len].to_vec() };
            let total_faults = self.tasks[t].numa.total_faults;
            self.numa_groups.push(NumaGroup { gid: self.tasks[t].pid, refcount: 1, nr_tasks: 1, faults, total_faults, max_faults_cpu: 0, active_nodes: 1 });
            self.tasks[t].numa.group = Some(self.numa_groups.len() - 1);
            self.trace_group(t, true, self.numa_groups.len() - 1);
        }
        let my = self.tasks[t].numa.group.unwrap_or_default();
        let cpu = cpupid_to_cpu(cpupid);
        // whoever runs on the last toucher's CPU now
        let Some(tsk) = self.cpus.get(cpu).and_then(|c| c.curr()) else { return false };
        if !cpupid_match_pid(self.tasks[tsk].pid, cpupid) {
            return false;
        }
        let Some(grp) = self.tasks[tsk].numa.group else { return false };
        if grp == my {
            return false;
        }
        // the bigger group never joins the smaller; ties broken by address (here: index)
        let (mine, theirs) = (self.numa_groups[my].nr_tasks, self.numa_groups[grp].nr_tasks);
        if mine > theirs || (mine == theirs && my > grp) {
            return false;
        }
        let join = self.tasks[tsk].mm == self.tasks[t].mm || flags & TNF_SHARED != 0;
        if !join || self.numa_groups[grp].refcount == 0 {
            return !join;
        }
        let faults = &self.tasks[t].numa.faults;
        for i in 0..len.min(faults.len()) {
            self.numa_groups[my].faults[i] -= faults[i];
            self.numa_groups[grp].faults[i] += faults[i];
        }
        let total = self.tasks[t].numa.total_faults;
        self.numa_groups[my].total_faults -= total;
        self.numa_groups[grp].total_faults += total;
        self.numa_groups[my].nr_tasks -= 1;
        self.numa_groups[my].refcount -= 1;
        self.numa_groups[grp].nr_tasks += 1;
        self.numa_groups[grp].refcount += 1;
        self.tasks[t].numa.group = Some(grp);
        self.trace_group(t, false, grp);
        false
    }

    /// The exiting task leaves its group, taking its faults with it.
    // kernel/sched/fair.c: task_numa_free
    pub fn task_numa_free(&mut self, t: usize) {
        // the exited task keeps its group index for reporting
        let Some(g) = self.tasks[t].numa.group else { return };
        let len = self.group_stats_len().min(self.tasks[t].numa.faults.len());
        for i in 0..len {
            self.numa_groups[g].faults[i] -= self.tasks[t].numa.faults[i];
        }
        self.numa_groups[g].total_faults -= self.tasks[t].numa.total_faults;
        self.numa_groups[g].nr_tasks -= 1;
        self.numa_groups[g].refcount -= 1;
    }

    /// task_scan_max/start scaling for a grouped task: period * refcount * (shared+1) /
    /// (private+shared+1), from the group's memory faults (v4.14+, `numa-scan-group-scale`).
    pub fn group_scan_scale(&self, t: usize, period: u64) -> u64 {
        let Some(g) = self.tasks[t].numa.group.filter(|_| self.feature(Feature::NumaScanGroupScale)) else {
            return period;
        };
        let ng = &self.numa_groups[g];
        let (shared, private) = ng.shared_private(self.topo.nr_nodes);
        let (shared, private) = (shared.max(0) as u64, private.max(0) as u64);
        period * ng.refcount as u64 * (shared + 1) / (private + shared + 1)
    }
}

#[cfg(test)]
mod tests {
    use crate::kernel::Kernel;
    use crate::sched::numa::fault::{cpu_pid_to_cpupid, task_faults_idx, TNF_NO_GROUP};
    use crate::testutil::{small_kernel, thread};

    /// Two threads of one process, without placement in between their faults.
    fn two_threads() -> (Kernel, usize, usize) {
        let mut k = small_kernel("");
        let (a, b) = (thread(&k, 0), thread(&k, 1));
        k.tasks[a].numa.migrate_retry = u64::MAX;
        k.tasks[b].numa.migrate_retry = u64::MAX;
        (k, a, b)
    }

    /// kernel/sched/fair.c: task_numa_group — a shared fault whose last toucher is a running
    /// thread of the same process puts both in one group; the fault then counts as shared.
    #[test]
    fn threads_of_one_process_join_through_last_cpupid() {
        let (mut k, a, b) = two_threads();
        // b faults first with a's stamp (a runs on its CPU): b creates its group, a has none
        let stamp_a = cpu_pid_to_cpupid(k.tasks[a].cpu, k.tasks[a].pid);
        k.task_numa_fault(b, stamp_a, 0, 1, 0);
        assert!(k.tasks[b].numa.group.is_some() && k.tasks[a].numa.group.is_none(), "a has no group to join yet");
        let stamp_b = cpu_pid_to_cpupid(k.tasks[b].cpu, k.tasks[b].pid);
        k.task_numa_fault(a, stamp_b, 0, 1, 0);
        let (ga, gb) = (k.tasks[a].numa.group.unwrap(), k.tasks[b].numa.group.unwrap());
        assert_ne!(ga, gb, "equal sizes: the group at the higher address does not join");
        k.task_numa_fault(b, stamp_a, 0, 1, 0);
        assert_eq!(k.tasks[b].numa.group, Some(ga), "b joins a's group");
        let ng = &k.numa_groups[ga];
        assert_eq!((ng.nr_tasks, ng.refcount), (2, 2));
        assert_eq!((k.numa_groups[gb].nr_tasks, k.numa_groups[gb].refcount), (0, 0));
        let n = k.topo.nr_nodes;
        // b's faults (1 from the first fault, 1 now) are counted shared: MEMBUF priv 0
        assert_eq!(k.tasks[b].numa.faults[task_faults_idx(n, 2, 0, 0)], 2);
    }

    /// kernel/sched/fair.c: task_scan_max — since v4.14 (b5dd77c8bdad) a grouped task's
    /// maximum period is multiplied by the group's refcount and shared share; 4.0 caps it at
    /// scan_period_max / windows whatever the group.
    #[test]
    fn group_scales_the_scan_period_max_only_since_4_14() {
        let smax = |extra: &str| {
            let mut k = small_kernel(extra);
            let (a, b) = (thread(&k, 0), thread(&k, 1));
            let (stamp_a, stamp_b) = (cpu_pid_to_cpupid(k.tasks[a].cpu, k.tasks[a].pid), cpu_pid_to_cpupid(k.tasks[b].cpu, k.tasks[b].pid));
            k.task_numa_fault(b, stamp_a, 0, 1, 0);
            k.task_numa_fault(a, stamp_b, 0, 1, 0);
            k.task_numa_fault(b, stamp_a, 0, 1, 0);
            assert_eq!(k.numa_groups[k.tasks[b].numa.group.unwrap()].refcount, 2);
            k.mms[0].node_pages = std::array::from_fn(|n| if n == 0 { 262144 } else { 0 }); // 1 GiB -> 4 windows, 15 s
            k.task_scan_max(b)
        };
        assert_eq!(smax("[kernel.features]\nnuma-scan-group-scale = false"), 15000);
        assert!(smax("") > 15000, "two tasks with mostly shared faults stretch the maximum");
    }

    /// TNF_NO_GROUP (read-only mapping, or the rule of the modelled kernel): no group is
    /// created or joined.
    #[test]
    fn no_group_faults_never_group() {
        let (mut k, a, b) = two_threads();
        let stamp_b = cpu_pid_to_cpupid(k.tasks[b].cpu, k.tasks[b].pid);
        k.task_numa_fault(a, stamp_b, 0, 1, TNF_NO_GROUP);
        assert!(k.tasks[a].numa.group.is_none() && k.numa_groups.is_empty());
    }

    /// The last toucher is no longer running on its CPU: nothing to join.
    #[test]
    fn no_join_when_last_toucher_is_not_running_there() {
        let (mut k, a, b) = two_threads();
        let stamp_a = cpu_pid_to_cpupid(k.tasks[a].cpu, k.tasks[a].pid);
        k.task_numa_fault(b, stamp_a, 0, 1, 0);
        // a stamp naming b's pid on a's CPU: the task there is a, pid bits differ
        let wrong = cpu_pid_to_cpupid(k.tasks[a].cpu, k.tasks[b].pid);
        let gb = k.tasks[b].numa.group;
        k.task_numa_fault(a, wrong, 0, 1, 0);
        assert_ne!(k.tasks[a].numa.group, gb);
    }
}

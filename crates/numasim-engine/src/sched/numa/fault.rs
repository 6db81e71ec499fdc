//! Hint-fault bookkeeping on the scheduler side (kernel/sched/fair.c) and the cpupid helpers
//! (include/linux/mm.h).

use super::group::ACTIVE_NODE_FRACTION;
use crate::features::Feature;
use crate::kernel::Kernel;
use crate::mm::pgtable::CPUPID_UNSET;
use crate::variants::PlacementCall;

// include/linux/sched/numa_balancing.h: TNF_* flags
pub const TNF_MIGRATED: u32 = 0x01;
pub const TNF_NO_GROUP: u32 = 0x02;
pub const TNF_SHARED: u32 = 0x04;
pub const TNF_FAULT_LOCAL: u32 = 0x08;
pub const TNF_MIGRATE_FAIL: u32 = 0x10;

const LAST_PID_MASK: u32 = 0xff;

// include/linux/mm.h: cpu_pid_to_cpupid
pub fn cpu_pid_to_cpupid(cpu: usize, pid: u32) -> u32 {
    ((cpu as u32) << 8) | (pid & LAST_PID_MASK)
}

// include/linux/mm.h: cpupid_to_cpu
pub fn cpupid_to_cpu(cpupid: u32) -> usize {
    (cpupid >> 8) as usize
}

// include/linux/mm.h: cpupid_pid_unset (pid bits all ones)
pub fn cpupid_pid_unset(cpupid: u32) -> bool {
    cpupid & LAST_PID_MASK == LAST_PID_MASK
}

// include/linux/mm.h: cpupid_valid (a CPU that exists)
pub fn cpupid_valid(cpupid: u32, nr_cpus: usize) -> bool {
    cpupid_to_cpu(cpupid) < nr_cpus
}

// include/linux/mm.h: cpupid_match_pid
pub fn cpupid_match_pid(pid: u32, cpupid: u32) -> bool {
    pid & LAST_PID_MASK == cpupid & LAST_PID_MASK
}

// kernel/sched/fair.c: task_faults_idx
pub fn task_faults_idx(nr_nodes: usize, stat: usize, nid: usize, private: usize) -> usize {
    2 * (stat * nr_nodes + nid) + private
}
pub const NUMA_MEM: usize = 0;
pub const NUMA_CPU: usize = 1;
pub const NUMA_MEMBUF: usize = 2;
pub const NUMA_CPUBUF: usize = 3;

impl Kernel {
    /// Two-stage filter: migrate only if the previous fault came from the same node (spec §3.2).
    // kernel/sched/fair.c: should_numa_migrate_memory
    pub fn should_numa_migrate_memory(&mut self, t: usize, vma: usize, idx: u64, src_nid: usize) -> bool {
        let (mm, cpu, pid) = (self.tasks[t].mm, self.tasks[t].cpu, self.tasks[t].pid);
        let dst_nid = self.cpu_node(cpu);
        if self.nodes[dst_nid].present == 0 {
            return false; // !node_state(dst_nid, N_MEMORY)
        }
        if self.folio_use_access_time(src_nid) {
            // a slow-tier folio moves by hotness, not by the private/shared filter
            let nr = self.mms[mm].vmas[vma].pt.folio(idx).1;
            return self.should_promote(mm, vma, idx, nr, dst_nid);
        }
        let this_cpupid = cpu_pid_to_cpupid(cpu, pid);
        // folio_xchg_last_cpupid: the stamp is updated here
        let slot = &mut self.mms[mm].vmas[vma].pt.pages[idx as usize].last_cpupid;
        let last_cpupid = std::mem::replace(slot, this_cpupid);
        if let Some(file) = self.page_object(mm, vma, idx) {
            self.shmem_set_last_cpupid(file, idx, this_cpupid);
        }
        // 6.1: outside tiering mode a lower-tier page's first fault does not migrate it
        if self.feature(Feature::NumaTieringHotThreshold) && !self.tiering_mode() && !self.node_is_toptier(src_nid) && !cpupid_valid(last_cpupid, self.topo.nr_cpus()) {
            return false;
        }
        let p = &self.tasks[t].numa;
        // early life: accept first-touch or same-task faults immediately
        if (p.preferred_nid.is_none() || p.scan_seq <= 4) && (cpupid_pid_unset(last_cpupid) || cpupid_match_pid(pid, last_cpupid)) {
            return true;
        }
        // the previous fault must have come from the same node
        if !cpupid_pid_unset(last_cpupid) && self.cpu_node_of_cpupid(last_cpupid) != Some(dst_nid) {
            return false;
        }
        if cpupid_match_pid(pid, last_cpupid) {
            return true; // private
        }
        let Some(g) = self.tasks[t].numa.group else { return true }; // shared, no group yet
                                                                     // shared within a group: move toward where the group's CPUs are
        let (nr, ng) = (self.topo.nr_nodes, &self.numa_groups[g]);
        let (cpu_dst, cpu_src) = (ng.faults_cpu(nr, dst_nid), ng.faults_cpu(nr, src_nid));
        if cpu_dst > cpu_src * ACTIVE_NODE_FRACTION {
            return true;
        }
        // 3/4 hysteresis on the group's memory faults
        cpu_dst * ng.faults_mem(nr, src_nid) * 3 > cpu_src * ng.faults_mem(nr, dst_nid) * 4
    }

    fn cpu_node_of_cpupid(&self, cpupid: u32) -> Option<usize> {
        self.topo.cpu_node.get(cpupid_to_cpu(cpupid)).copied()
    }

    /// Record a hinting fault in the task's statistics (spec §4.2).
    // kernel/sched/fair.c: task_numa_fault
    pub fn task_numa_fault(&mut self, t: usize, last_cpupid: u32, mem_node: usize, pages: u64, flags: u32) {
        if !self.numa_balancing() {
            return;
        }
        // what the VM's kprobe at the function's entry sees (realkernel: TNF_MIGRATE_FAIL calls)
        if flags & TNF_MIGRATE_FAIL != 0 {
            self.trace.migrate_fail_faults += 1;
        }
        if self.trace.tracing_faults() {
            self.record_fault_kind(t, last_cpupid, pages, flags);
        }
        // 33024536bafd (6.1): no NUMA statistics for faults on a lower tier in tiering mode
        if self.feature(Feature::NumaTieringHotThreshold) && !self.node_is_toptier(mem_node) && (self.tiering_mode() || !cpupid_valid(last_cpupid, self.topo.nr_cpus())) {
            return;
        }
        let nr_nodes = self.topo.nr_nodes;
        let cpu_node = self.task_node(t);
        let pid = self.tasks[t].pid;
        let p = &mut self.tasks[t].numa;
        if p.faults.is_empty() {
            p.faults = vec![0; 8 * nr_nodes];
            p.total_faults = 0;
            p.faults_locality = [0; 3];
        }
        // first access (all-ones stamp) counts as private
        let mut private = last_cpupid == CPUPID_UNSET || cpupid_match_pid(pid, last_cpupid);
        if !private && flags & TNF_NO_GROUP == 0 {
            private = self.task_numa_group(t, last_cpupid, flags);
        }
        let mut local = flags & TNF_FAULT_LOCAL != 0;
        // a shared fault between two of the group's active nodes counts as local
        if let Some(g) = self.tasks[t].numa.group {
            let ng = &self.numa_groups[g];
            if !private && !local && ng.active_nodes > 1 && ng.is_active(nr_nodes, cpu_node) && ng.is_active(nr_nodes, mem_node) {
                local = true;
            }
        }
        // before 4.19 every fault tries the placement (it acts once per pass); since, only when
        // the retry interval has passed, with the move toward the preferred node
        let retry = self.now > self.tasks[t].numa.migrate_retry;
        if retry || self.variants().placement_call == PlacementCall::Base {
            self.task_numa_placement(t);
        }
        if retry {
            self.numa_migrate_preferred(t);
        }
        let slowscan = self.feature(Feature::NumaSlowscanOnMigrateFail);
        let p = &mut self.tasks[t].numa;
        if flags & TNF_MIGRATED != 0 {
            p.pages_migrated += pages;
        }
        if flags & TNF_MIGRATE_FAIL != 0 && slowscan {
            p.faults_locality[2] += pages;
        }
        let pv = private as usize;
        p.faults[task_faults_idx(nr_nodes, NUMA_MEMBUF, mem_node, pv)] += pages as i64;
        p.faults[task_faults_idx(nr_nodes, NUMA_CPUBUF, cpu_node, pv)] += pages as i64;
        p.faults_locality[local as usize] += pages;
    }
}

impl Kernel {
    /// `run.trace_faults`: count the call as the VM's kprobe on task_numa_fault does.
    fn record_fault_kind(&mut self, t: usize, last_cpupid: u32, pages: u64, flags: u32) {
        let pid = self.tasks[t].pid;
        let last = if last_cpupid == CPUPID_UNSET {
            0
        } else if cpupid_match_pid(pid, last_cpupid) {
            1
        } else {
            2
        };
        let key = crate::trace::FaultKind {
            centisecond: self.clock / 10_000_000,
            pid,
            local: flags & TNF_FAULT_LOCAL != 0,
            last,
            migrated: flags & TNF_MIGRATED != 0,
            failed: flags & TNF_MIGRATE_FAIL != 0,
        };
        if let Some(m) = self.trace.fault_kinds.as_mut() {
            *m.entry(key).or_insert(0) += pages;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpupid_packs_cpu_and_low_pid_bits() {
        let c = cpu_pid_to_cpupid(37, 0x1234);
        assert_eq!(cpupid_to_cpu(c), 37);
        assert!(cpupid_match_pid(0x5534, c), "only the low 8 PID bits are kept");
        assert!(!cpupid_match_pid(0x1235, c));
        assert!(cpupid_pid_unset(CPUPID_UNSET));
        // a PID whose low byte is 0xff is indistinguishable from "unset" (include/linux/mm.h)
        assert!(cpupid_pid_unset(cpu_pid_to_cpupid(3, 0x2ff)));
    }
}

#[cfg(test)]
mod filter_tests {
    use super::*;
    use crate::testutil::{pin, place_page, small_kernel, thread};

    fn past_early_life(k: &mut Kernel, t: usize) {
        k.tasks[t].numa.preferred_nid = Some(1);
        k.tasks[t].numa.scan_seq = 5;
    }

    /// kernel/sched/fair.c: should_numa_migrate_memory — two-stage filter: after early life, a
    /// fault whose previous toucher ran on another node only stamps last_cpupid; the next fault
    /// from this node migrates.
    #[test]
    fn first_fault_from_new_cpupid_does_not_migrate() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        pin(&mut k, t, 2);
        past_early_life(&mut k, t);
        place_page(&mut k, 100, 0);
        k.mms[0].vmas[0].pt.set_last_cpupid(100, cpu_pid_to_cpupid(0, 77));
        assert!(!k.should_numa_migrate_memory(t, 0, 100, 0));
        assert_eq!(cpupid_to_cpu(k.mms[0].vmas[0].pt.last_cpupid(100)), 2, "folio_xchg_last_cpupid stamps the page");
        assert!(k.should_numa_migrate_memory(t, 0, 100, 0), "second fault from the same node migrates");
    }

    /// kernel/sched/fair.c: should_numa_migrate_memory — early life (no preferred node or
    /// numa_scan_seq <= 4) accepts a first touch (unset cpupid) at once.
    #[test]
    fn early_life_accepts_first_touch() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        pin(&mut k, t, 2);
        place_page(&mut k, 5, 0);
        assert_eq!(k.mms[0].vmas[0].pt.last_cpupid(5), CPUPID_UNSET);
        assert!(k.should_numa_migrate_memory(t, 0, 5, 0));
    }

    /// kernel/sched/fair.c: should_numa_migrate_memory — a shared fault from the same node with
    /// no numa_group migrates ("shared, no group yet").
    #[test]
    fn shared_fault_from_same_node_without_group_migrates() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        pin(&mut k, t, 2);
        past_early_life(&mut k, t);
        place_page(&mut k, 6, 0);
        k.mms[0].vmas[0].pt.set_last_cpupid(6, cpu_pid_to_cpupid(3, 78));
        assert!(k.should_numa_migrate_memory(t, 0, 6, 0));
    }

    /// kernel/sched/fair.c: task_numa_fault — buffers count faults per (node, private), locality
    /// counts local/remote pages, TNF_MIGRATE_FAIL feeds numa_faults_locality[2].
    #[test]
    fn task_numa_fault_bookkeeping() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        pin(&mut k, t, 2);
        let pid = k.tasks[t].pid;
        k.tasks[t].numa.migrate_retry = u64::MAX; // no placement in between
        k.task_numa_fault(t, CPUPID_UNSET, 0, 1, TNF_MIGRATE_FAIL);
        k.task_numa_fault(t, cpu_pid_to_cpupid(2, pid), 1, 1, TNF_FAULT_LOCAL);
        k.task_numa_fault(t, cpu_pid_to_cpupid(0, pid + 1), 0, 1, 0);
        let p = &k.tasks[t].numa;
        let n = 2;
        assert_eq!(p.faults[task_faults_idx(n, NUMA_MEMBUF, 0, 1)], 1, "first access counts as private");
        assert_eq!(p.faults[task_faults_idx(n, NUMA_MEMBUF, 1, 1)], 1);
        assert_eq!(p.faults[task_faults_idx(n, NUMA_MEMBUF, 0, 0)], 1, "another pid: shared");
        assert_eq!(p.faults[task_faults_idx(n, NUMA_CPUBUF, 1, 0)] + p.faults[task_faults_idx(n, NUMA_CPUBUF, 1, 1)], 3);
        assert_eq!(p.faults_locality, [2, 1, 1]);
    }

    /// numa-slowscan-on-migrate-fail off (before v4.0): failures are not recorded.
    #[test]
    fn migrate_fail_not_recorded_without_slowscan() {
        let mut k = small_kernel("[kernel.features]\nnuma-slowscan-on-migrate-fail = false");
        let t = thread(&k, 0);
        k.tasks[t].numa.migrate_retry = u64::MAX;
        k.task_numa_fault(t, CPUPID_UNSET, 0, 1, TNF_MIGRATE_FAIL);
        assert_eq!(k.tasks[t].numa.faults_locality[2], 0);
    }
}

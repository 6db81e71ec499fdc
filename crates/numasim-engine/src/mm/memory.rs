//! Page faults (mm/memory.c): first touch, NUMA hinting faults, write-protect faults.
//!
//! Each function returns the system time (ns) the fault cost the faulting task.

use crate::features::Feature;
use crate::kernel::Kernel;
use crate::mm::pgtable::{PTE_DIRTY, PTE_WRITE};
use crate::mm::types::VM_WRITE;
use crate::sched::numa::fault::{TNF_FAULT_LOCAL, TNF_MIGRATED, TNF_MIGRATE_FAIL, TNF_NO_GROUP};
use crate::vmstat::VmEvent;

impl Kernel {
    /// First touch of an anonymous page: allocate under the VMA's or task's policy and zero it.
    // mm/memory.c: do_anonymous_page
    pub fn do_anonymous_page(&mut self, t: usize, vma: usize, idx: u64) -> Option<f64> {
        let (mm, cpu) = (self.tasks[t].mm, self.tasks[t].cpu);
        let pol = self.mms[mm].vmas[vma].policy.unwrap_or(self.tasks[t].policy);
        let Some(node) = self.alloc_page(&pol, cpu) else {
            self.oom = Some(format!("no free page for pid {} (policy {:?})", self.tasks[t].pid, pol.mode));
            return None;
        };
        let m = &mut self.mms[mm];
        m.vmas[vma].pt.populate(idx, node, PTE_WRITE | PTE_DIRTY);
        m.node_pages[node] += 1;
        self.count(VmEvent::Pgfault, 1);
        Some(self.cost.fault_entry_exit_ns + self.cost.clear_page_ns)
    }

    /// Write to a present read-only PTE of an exclusive anonymous page: reuse it, no copy.
    // mm/memory.c: do_wp_page (wp_page_reuse)
    pub fn do_wp_page(&mut self, t: usize, vma: usize, idx: u64) -> f64 {
        let mm = self.tasks[t].mm;
        self.mms[mm].vmas[vma].pt.make_writable(idx);
        self.count(VmEvent::Pgfault, 1);
        self.cost.fault_entry_exit_ns
    }

    /// NUMA hinting fault on a PROT_NONE PTE (v6.11+ shape; spec §2.2, §2.6).
    // mm/memory.c: do_numa_page
    pub fn do_numa_page(&mut self, t: usize, vma: usize, idx: u64) -> f64 {
        let (mm, cpu) = (self.tasks[t].mm, self.tasks[t].cpu);
        let this_node = self.cpu_node(cpu);
        let mut sys = self.cost.fault_entry_exit_ns + self.cost.hint_fault_ns;
        self.count(VmEvent::Pgfault, 1);
        self.events.hint_faults += 1;
        // can_change_pte_writable: private writable VMA, exclusive anonymous page
        let writable = self.mms[mm].vmas[vma].flags & VM_WRITE != 0;
        let preserve = self.feature(Feature::NumaPreserveWrite);
        let mut flags = 0;
        if !writable {
            flags |= TNF_NO_GROUP;
        }
        let nid = self.mms[mm].vmas[vma].pt.node[idx as usize] as usize;
        // numa_migrate_check: read last_cpupid before mpol_misplaced updates it
        let last_cpupid = self.mms[mm].vmas[vma].pt.cpupid[idx as usize];
        let pid = self.tasks[t].pid;
        self.vma_set_access_pid_bit(mm, vma, pid);
        self.count(VmEvent::NumaHintFaults, 1);
        if nid == this_node {
            self.count(VmEvent::NumaHintFaultsLocal, 1);
            flags |= TNF_FAULT_LOCAL;
        }
        let target = self.mpol_misplaced(t, vma, idx, nid);
        let delay_map = self.feature(Feature::NumaDelayMap);
        if !delay_map {
            // <= v5.12: the PTE is made accessible before migration is tried
            self.mms[mm].vmas[vma].pt.make_present(idx, writable && preserve);
        }
        let mut mem_node = nid;
        if let Some(target) = target {
            if !self.migrate_misplaced_folio_prepare(target, 1) {
                flags |= TNF_MIGRATE_FAIL;
            } else {
                sys += self.migrate_misplaced_folio(t, vma, idx, target, !delay_map);
                flags |= TNF_MIGRATED;
                mem_node = target;
                if delay_map {
                    // remove_migration_pte from a read-only exclusive entry: present, not writable
                    self.mms[mm].vmas[vma].pt.make_present(idx, false);
                }
            }
        }
        if delay_map && flags & TNF_MIGRATED == 0 {
            // out_map: restore the PTE; write bit only if computed writable and not after a failure
            let w = writable && preserve && flags & TNF_MIGRATE_FAIL == 0;
            self.mms[mm].vmas[vma].pt.make_present(idx, w);
        }
        self.task_numa_fault(t, last_cpupid, mem_node, 1, flags);
        sys
    }
}

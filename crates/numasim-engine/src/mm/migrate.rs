//! Migration of misplaced pages on a hinting fault (mm/migrate.c).

use crate::kernel::Kernel;
use crate::vmstat::VmEvent;

impl Kernel {
    /// Checks before isolating a folio for a NUMA migration (called under the PTL in v6.11+).
    // mm/migrate.c: migrate_misplaced_folio_prepare
    pub fn migrate_misplaced_folio_prepare(&mut self, target: usize, nr: u64) -> bool {
        // The folio is always on the LRU here: a fault and its migration complete within the
        // faulting task's step, so no other fault can find it isolated (modelled with issue 3).
        self.migrate_balanced_pgdat(target, nr)
    }

    /// Move one base page to `target`; returns the system time it took.
    /// `accessible`: the PTE was made present first (pre-v5.13 order), so the unmap must flush.
    // mm/migrate.c: migrate_misplaced_folio -> migrate_pages(MIGRATE_ASYNC, MR_NUMA_MISPLACED)
    pub fn migrate_misplaced_folio(&mut self, t: usize, vma: usize, idx: u64, target: usize, accessible: bool) -> f64 {
        let (mm, cpu) = (self.tasks[t].mm, self.tasks[t].cpu);
        let src = self.mms[mm].vmas[vma].pt.node[idx as usize] as usize;
        if !self.alloc_page_thisnode(target, cpu) {
            self.count(VmEvent::PgmigrateFail, 1);
            return self.cost.migrate_page_ns;
        }
        let mut sys = self.cost.migrate_page_ns + self.cost.page_copy_ns(self.cpu_node(cpu), src, target);
        if accessible {
            // try_to_migrate_one -> ptep_clear_flush on a present PTE: flush_tlb_page
            sys += self.flush_tlb_mm_range(mm, cpu, 1);
        }
        let m = &mut self.mms[mm];
        m.vmas[vma].pt.set_node(idx, target);
        m.node_pages[src] -= 1;
        m.node_pages[target] += 1;
        self.free_page(src);
        self.count(VmEvent::PgmigrateSuccess, 1);
        self.count(VmEvent::NumaPagesMigrated, 1);
        self.events.migrations += 1;
        sys
    }
}

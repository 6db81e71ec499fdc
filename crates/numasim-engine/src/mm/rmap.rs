//! Unmapping a page for migration and the deferred-flush decision (mm/rmap.c).

use crate::arch::x86::tlb::TlbBatch;
use crate::features::Feature;
use crate::kernel::Kernel;

/// One page of one mm, as `migrate_pages()` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRef {
    pub mm: usize,
    pub vma: usize,
    pub idx: u64,
}

/// `PageRef::mm` of a page of a shared object (a shmem file or a COW share; `vma` is its index).
const IN_OBJECT: usize = usize::MAX;

impl PageRef {
    /// Page `idx` of shared object `file` (an LRU add batch's entry for a shared folio).
    pub fn in_object(file: usize, idx: u64) -> Self {
        PageRef { mm: IN_OBJECT, vma: file, idx }
    }

    /// The shared object of an `in_object` entry.
    pub fn object(&self) -> Option<usize> {
        (self.mm == IN_OBJECT).then_some(self.vma)
    }
}

impl Kernel {
    /// x86 pte_accessible: present, or PROT_NONE while the mm has a TLB flush pending (another
    /// thread's change_protection is between its PTE updates and its flush).
    // arch/x86/include/asm/pgtable.h: pte_accessible
    pub fn pte_accessible(&self, p: PageRef) -> bool {
        !self.mms[p.mm].vmas[p.vma].pt.protnone(p.idx) || self.mm_tlb_flush_pending(p.mm)
    }

    // include/linux/mm_types.h: mm_tlb_flush_pending
    pub fn mm_tlb_flush_pending(&self, mm: usize) -> bool {
        let (from, until) = self.mms[mm].tlb_flush_pending;
        (from..until).contains(&self.clock)
    }

    /// Replace the folio's PTEs (or its PMD) by migration entries. A PMD is invalidated and
    /// flushed at once (pmdp_invalidate). Each PTE: with a batch (TTU_BATCH_FLUSH) and another
    /// CPU in the mm's mask the flush is deferred into it; otherwise an accessible PTE is flushed
    /// now. Returns the cost of any immediate flush, ns.
    // mm/rmap.c: try_to_migrate_one (set_pmd_migration_entry / set_tlb_ubc_flush_pending / ptep_clear_flush)
    pub fn try_to_migrate_one(&mut self, p: PageRef, cpu: usize, mut batch: Option<&mut TlbBatch>) -> f64 {
        if let Some(file) = self.page_object(p.mm, p.vma, p.idx) {
            return self.try_to_migrate_file(file, p.idx, cpu, batch);
        }
        let pt = &self.mms[p.mm].vmas[p.vma].pt;
        let (head, nr) = pt.folio(p.idx);
        let pmd = pt.pmd_mapped(p.idx);
        let mut cost = if self.kvms.is_empty() { 0.0 } else { self.mmu_notifier_clear(p.mm, p.vma, head, nr, cpu) };
        if pmd {
            return cost + self.flush_tlb_mm_range(p.mm, cpu, 1);
        }
        for idx in head..head + nr {
            cost += self.try_to_migrate_pte(PageRef { idx, ..p }, cpu, batch.as_deref_mut());
        }
        cost
    }

    /// A shmem folio (a base page): every mapping of its file that maps it gets a migration
    /// entry, each mm's flush deferred into the batch or done at once as for one mm; a flush
    /// batch therefore covers the union of the mappings' CPUs (spec E6).
    // mm/rmap.c: try_to_migrate -> rmap_walk_file -> try_to_migrate_one
    fn try_to_migrate_file(&mut self, file: usize, idx: u64, cpu: usize, mut batch: Option<&mut TlbBatch>) -> f64 {
        let mut cost = 0.0;
        for (mm, vma) in self.shmem_mappings_of(file, idx) {
            if !self.kvms.is_empty() {
                cost += self.mmu_notifier_clear(mm, vma, idx, 1, cpu);
            }
            cost += self.try_to_migrate_pte(PageRef { mm, vma, idx }, cpu, batch.as_deref_mut());
        }
        cost
    }

    fn try_to_migrate_pte(&mut self, p: PageRef, cpu: usize, batch: Option<&mut TlbBatch>) -> f64 {
        let accessible = self.pte_accessible(p);
        // arch_tlbbatch_should_defer: another CPU may hold the mm's translations
        let defer = |k: &Kernel| k.mms[p.mm].cpumask.iter().enumerate().any(|(c, &b)| b && c != cpu);
        match batch {
            Some(batch) if defer(self) => {
                // set_tlb_ubc_flush_pending: since 4d4b6d66db63 (v6.4) nothing to flush for a
                // PTE that is not accessible; the v6.3 code deferred a flush regardless
                if accessible || !self.feature(Feature::MigrateSkipInaccessibleFlush) {
                    self.arch_tlbbatch_add_pending(batch, p.mm);
                }
                0.0
            }
            // ptep_clear_flush flushes only an accessible PTE (flush_tlb_page)
            _ if accessible => self.flush_tlb_mm_range(p.mm, cpu, 1),
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PageRef;
    use crate::testutil::{place_page, small_kernel};
    use crate::vmstat::VmEvent::*;

    /// arch/x86/include/asm/pgtable.h: pte_accessible — a PROT_NONE PTE still counts as
    /// accessible while the mm has a TLB flush pending (another thread's change_protection has
    /// cleared PTEs it has not flushed yet), so ptep_clear_flush on it must shoot down the TLBs;
    /// before and after that window unmapping it for migration flushes nothing.
    #[test]
    fn protnone_pte_is_accessible_while_a_flush_is_pending() {
        let mut k = small_kernel("");
        place_page(&mut k, 7, 0);
        k.mms[0].vmas[0].pt.make_protnone(7);
        let p = PageRef { mm: 0, vma: 0, idx: 7 };
        k.mms[0].tlb_flush_pending = (1_000, 2_000);
        for (clock, pending) in [(999, false), (1_000, true), (1_999, true), (2_000, false)] {
            k.clock = clock;
            assert_eq!(k.pte_accessible(p), pending, "at {clock} ns");
        }
        k.clock = 500;
        assert_eq!(k.try_to_migrate_one(p, 0, None), 0.0);
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush), 0);
        k.clock = 1_500;
        assert!(k.try_to_migrate_one(p, 0, None) > 0.0);
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush), 1, "the other CPUs running the mm get an IPI");
    }
}

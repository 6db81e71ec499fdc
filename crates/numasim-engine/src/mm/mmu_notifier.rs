//! MMU notifiers: secondary MMUs (KVM) hear of every host invalidation (mm/mmu_notifier.c).

use crate::features::Feature;
use crate::kernel::Kernel;
use crate::mm::pgtable::BLOCK_PAGES;

/// Pages per region that gets its own invalidation: a PUD (1 GiB) up to v6.11, a P4D (512 GiB)
/// since v6.12's "mm/mprotect: push mmu notifier to PUDs".
const PUD_PAGES: u64 = 1 << 18;
const P4D_PAGES: u64 = 1 << 27;

impl Kernel {
    /// The invalidations of one change_protection(MM_CP_PROT_NUMA) call over pages
    /// [start, end) of `vma`: one MMU_NOTIFY_PROTECTION_VMA range per region that has a page
    /// table, from its first populated entry, issued before (and whatever) the PTE skips.
    /// Returns the subscribers' cost to the scanning task, ns.
    // mm/mprotect.c: change_pmd_range (<= v6.11) / change_pud_range (v6.12+):
    // mmu_notifier_invalidate_range_start
    pub fn mmu_notifier_prot_numa(&mut self, t: usize, vma: usize, start: u64, end: u64) -> f64 {
        let (mm, cpu) = (self.tasks[t].mm, self.tasks[t].cpu);
        let Some(vm) = self.kvm_of(mm) else {
            return 0.0; // no subscriber
        };
        let region = if self.feature(Feature::MmuNotifierPud) { P4D_PAGES } else { PUD_PAGES };
        let base = self.mms[mm].vmas[vma].start;
        let mut cost = 0.0;
        let mut i = start;
        while i < end {
            let seg_end = (((base + i) / region + 1) * region - base).min(end);
            let pt = &self.mms[mm].vmas[vma].pt;
            let first = (i / BLOCK_PAGES..seg_end.div_ceil(BLOCK_PAGES)).find(|&b| pt.blocks[b as usize].populated > 0);
            if let Some(b) = first {
                cost += self.kvm_mmu_notifier_invalidate_range_start(vm, vma, (b * BLOCK_PAGES).max(i), seg_end, true, cpu);
            }
            i = seg_end;
        }
        cost
    }

    /// A folio being unmapped for migration: MMU_NOTIFY_CLEAR over its pages. Returns the cost.
    // mm/rmap.c: try_to_migrate_one -> mmu_notifier_invalidate_range_start
    pub fn mmu_notifier_clear(&mut self, mm: usize, vma: usize, head: u64, nr: u64, cpu: usize) -> f64 {
        match self.kvm_of(mm) {
            Some(vm) => self.kvm_mmu_notifier_invalidate_range_start(vm, vma, head, head + nr, false, cpu),
            None => 0.0,
        }
    }
}

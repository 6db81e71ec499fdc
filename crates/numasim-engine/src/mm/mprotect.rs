//! change_protection for NUMA hinting (mm/mprotect.c, spec §1.7).

use crate::features::Feature;
use crate::kernel::Kernel;
use crate::mm::access_notifier::AccessNotifier;
use crate::mm::pgtable::{PageTable, BLOCK_PAGES};
use crate::mm::types::{VM_SHARED, VM_WRITE};
use crate::vmstat::VmEvent;

impl Kernel {
    /// Make the resident, accessible PTEs of [start, end) (VMA page indices) PROT_NONE.
    /// Returns the base pages changed (512 per THP PMD) and the page-table blocks walked.
    // mm/mprotect.c: change_protection -> change_pmd_range / change_pte_range (MM_CP_PROT_NUMA)
    pub fn change_protection_prot_numa(&mut self, t: usize, vma: usize, start: u64, end: u64) -> (u64, u64) {
        let mm = self.tasks[t].mm;
        // private VMA of a single-threaded process: pages already on this node are skipped
        let private = self.mms[mm].vmas[vma].flags & VM_SHARED == 0;
        let target = (private && self.mms[mm].users == 1).then(|| self.task_node(t) as u8);
        let mthp = self.feature(Feature::NumaMthp);
        // is_cow_mapping: private and may be written
        let cow = private && self.mms[mm].vmas[vma].flags & VM_WRITE != 0;
        let skip_refs = cow && self.feature(Feature::NumaSkipCowRefcount);
        let skip_pinned = self.feature(Feature::NumaSkipPinned);
        let any_pins = !self.mms[mm].io_pins.is_empty() || !self.mms[mm].longterm_pins.is_empty();
        // a sampled VMA's protected pages get their fault events as they are protected
        let sampler = self.access_subscription(mm, vma);
        // tiering mode: without NUMA_BALANCING_NORMAL top-tier folios are left alone
        // (a1a3a2fc304d); slow-tier ones are stamped with the scan time (6.1)
        let tiers = self.tiering_mode().then(|| (!self.cfg.tiering.normal(), self.feature(Feature::NumaTieringHotThreshold)));
        let (mut changed, mut walked, mut huge) = (0, 0, 0);
        let mut i = start;
        while i < end {
            let b = (i / BLOCK_PAGES) as usize;
            let bend = ((b as u64 + 1) * BLOCK_PAGES).min(end);
            walked += 1;
            let k = self.mms[mm].vmas[vma].pt.blocks[b];
            if k.populated == 0 || k.protnone == k.populated {
                i = bend;
                continue;
            }
            if k.pmd {
                // change_huge_pmd: none of the PTE path's skips apply to a THP PMD, except the
                // RFC's pinned check (seed 004, patch 2/3)
                let head = b as u64 * BLOCK_PAGES;
                if skip_pinned && any_pins && self.folio_maybe_dma_pinned(mm, vma, head, BLOCK_PAGES) {
                    i = bend;
                    continue;
                }
                if tiers.is_some_and(|t| self.prot_numa_tier_skip(mm, vma, head, t)) {
                    i = bend;
                    continue;
                }
                let pt = &mut self.mms[mm].vmas[vma].pt;
                for p in head..head + BLOCK_PAGES {
                    pt.make_protnone(p);
                }
                changed += BLOCK_PAGES;
                huge += 1;
                if let Some(s) = sampler {
                    self.access_notify_invalidate(s, head, BLOCK_PAGES, false);
                }
                i = bend;
                continue;
            }
            let mut p = i;
            while p < bend {
                let pt = &self.mms[mm].vmas[vma].pt;
                let (head, nr) = pt.folio(p);
                if !pt.populated(p) || pt.protnone(p) || Some(pt.nid(p)) == target {
                    // not present, already PROT_NONE ("avoid TLB flush"), or on the target node
                    p += 1;
                    continue;
                }
                if nr > 1 && private && self.prot_numa_skip_large(mm, vma, head, nr, mthp) {
                    p = (head + nr).min(bend);
                    continue;
                }
                // a pinned folio: page_count != 1 in a COW mapping (v4.19+), or in any mapping
                // with the RFC's patch
                if any_pins && (skip_refs || skip_pinned) && self.folio_maybe_dma_pinned(mm, vma, head, nr) {
                    p = (head + nr).min(bend);
                    continue;
                }
                // a folio shared copy-on-write since a fork (mapcount > 1 in 4.19, page_count != 1
                // later, folio_likely_mapped_shared from 6.10)
                if skip_refs && self.mms[mm].vmas[vma].pt.cow(head) {
                    p = (head + nr).min(bend);
                    continue;
                }
                // up to 6.9 page_count != 1 also passes by a folio waiting in an LRU add batch
                // (its reference); from 6.10 the test is folio_maybe_dma_pinned, which does not
                if skip_refs && !mthp && self.mms[mm].vmas[vma].pt.lru_batched(head) {
                    p = (head + nr).min(bend);
                    continue;
                }
                let fend = (head + nr).min(bend);
                if tiers.is_some_and(|t| self.prot_numa_tier_skip(mm, vma, head, t)) {
                    p = fend;
                    continue;
                }
                let pt = &mut self.mms[mm].vmas[vma].pt;
                for q in p..fend {
                    if !pt.protnone(q) && Some(pt.nid(q)) != target {
                        pt.make_protnone(q);
                        changed += 1;
                    }
                }
                if let Some(s) = sampler {
                    self.access_notify_invalidate(s, p, fend - p, false);
                }
                p = fend;
            }
            i = bend;
        }
        if huge > 0 {
            self.count(VmEvent::NumaHugePteUpdates, huge);
        }
        (changed, walked)
    }

    /// Tiering mode's rules for the folio at `head` (PTE and PMD paths alike): true to leave a
    /// top-tier folio alone without NUMA_BALANCING_NORMAL (`skip_top`, a1a3a2fc304d); else a
    /// slow-tier folio is stamped with the scan time (`stamp`, 6.1).
    // mm/mprotect.c: change_pte_range / change_huge_pmd (node_is_toptier, folio_xchg_access_time)
    fn prot_numa_tier_skip(&mut self, mm: usize, vma: usize, head: u64, (skip_top, stamp): (bool, bool)) -> bool {
        let top = self.node_is_toptier(self.mms[mm].vmas[vma].pt.nid(head) as usize);
        if skip_top && top {
            return true;
        }
        if stamp && !top {
            self.stamp_access_time(mm, vma, head);
        }
        false
    }

    /// The PTE path's rule for a large folio in a COW (private, may-write) mapping: before v6.10
    /// every PTE-mapped large folio has folio_ref_count > 1 and is skipped; with `numa-mthp`
    /// only a folio that may be DMA-pinned (or mapped by another process: never here) is.
    // mm/mprotect.c: change_pte_range (folio_ref_count != 1 / folio_maybe_dma_pinned)
    fn prot_numa_skip_large(&self, mm: usize, vma: usize, head: u64, nr: u64, mthp: bool) -> bool {
        !mthp || self.folio_maybe_dma_pinned(mm, vma, head, nr)
    }
}

impl PageTable {
    /// Pages of [first, first + n) that are PROT_NONE (tests).
    pub fn count_protnone(&self, first: u64, n: u64) -> u64 {
        (first..first + n).filter(|&i| self.protnone(i)).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{small_kernel, thread};
    use crate::vmstat::VmEvent;

    fn with_16k(version: &str) -> crate::kernel::Kernel {
        small_kernel(&format!("[kernel]\nversion = \"{version}\"\n[kernel.thp]\nsizes = {{ \"16K\" = \"always\" }}"))
    }

    /// mm/mprotect.c: change_pte_range — before v6.10 a PTE-mapped large folio in a COW mapping
    /// has folio_ref_count != 1 and is skipped; v6.10 (`numa-mthp`) protects it.
    #[test]
    fn ptemapped_large_folios_are_scanned_only_since_6_10() {
        for (version, protected) in [("6.9", 0), ("6.10", 64)] {
            let mut k = with_16k(version);
            let t = thread(&k, 0);
            assert_eq!(k.mms[0].vmas[0].pt.folio(5), (4, 4));
            let (n, _) = k.change_protection_prot_numa(t, 0, 0, 64);
            assert_eq!(n, protected, "kernel {version}");
            assert_eq!(k.mms[0].vmas[0].pt.count_protnone(0, 64), protected);
        }
    }

    /// mm/mprotect.c: change_pte_range (v6.10+: folio_maybe_dma_pinned) — a pinned large folio
    /// stays accessible; its neighbours do not.
    #[test]
    fn maybe_pinned_large_folio_is_skipped() {
        let mut k = with_16k("6.10");
        let t = thread(&k, 0);
        k.mms[0].io_pins.push((t, 0, 9, 1));
        let (n, _) = k.change_protection_prot_numa(t, 0, 0, 16);
        assert_eq!(n, 12);
        assert_eq!(k.mms[0].vmas[0].pt.count_protnone(8, 4), 0);
    }

    /// mm/huge_memory.c: change_huge_pmd — one numa_huge_pte_updates and 512 base pages per PMD.
    #[test]
    fn pmd_thp_counts_one_huge_update_and_512_pages() {
        let mut k = small_kernel("[kernel.thp]\nenabled = \"always\"");
        let t = thread(&k, 0);
        let (n, _) = k.change_protection_prot_numa(t, 0, 0, 1024);
        assert_eq!(n, 1024);
        assert_eq!(k.vmstat.get(VmEvent::NumaHugePteUpdates), 2);
        // a second pass finds the PMDs already PROT_NONE
        assert_eq!(k.change_protection_prot_numa(t, 0, 0, 1024).0, 0);
    }
}

//! The x86 TDP MMU: zapping SPTEs on invalidation and rebuilding them on EPT violations
//! (arch/x86/kvm/mmu/tdp_mmu.c, arch/x86/kvm/mmu/mmu.c).

use crate::kernel::Kernel;
use crate::mm::access_notifier::AccessNotifier;
use crate::mm::pgtable::BLOCK_PAGES;

impl Kernel {
    /// Zap the leaf SPTEs of guest pages [first, end); a huge SPTE overlapping the range goes
    /// whole. With `skip_pinned` (the RFC's patch 3/3, NUMA invalidations only) SPTEs of
    /// maybe-DMA-pinned pages stay. Each zapped page's next guest access refaults. Returns the
    /// leaf SPTEs zapped.
    // arch/x86/kvm/mmu/tdp_mmu.c: kvm_tdp_mmu_unmap_gfn_range -> tdp_mmu_zap_leafs
    pub fn kvm_tdp_mmu_unmap_gfn_range(&mut self, vm: usize, first: u64, end: u64, skip_pinned: bool) -> u64 {
        let (mm, vma) = (self.kvms[vm].mm, self.kvms[vm].memslot_vma);
        let end = end.min(self.mms[mm].vmas[vma].pt.len());
        let (mut zapped, mut kept) = (0u64, 0u64);
        let mut refault: Vec<(u64, u64)> = Vec::new();
        let mut i = first;
        while i < end {
            let b = i / BLOCK_PAGES;
            let head = b * BLOCK_PAGES;
            let bend = (head + BLOCK_PAGES).min(end);
            let words = &self.kvms[vm].spte[(head / 64) as usize..((head + BLOCK_PAGES).div_ceil(64) as usize).min(self.kvms[vm].spte.len())];
            if words.iter().all(|&w| w == 0) {
                i = bend;
                continue;
            }
            if self.mms[mm].vmas[vma].pt.pmd_mapped(head) {
                // a huge SPTE over a PMD-mapped THP
                if skip_pinned && self.folio_maybe_dma_pinned(mm, vma, head, BLOCK_PAGES) {
                    kept += 1;
                } else {
                    (head..head + BLOCK_PAGES).for_each(|p| {
                        self.kvms[vm].clear_spte(p);
                    });
                    zapped += 1;
                    refault.push((head, BLOCK_PAGES));
                }
                i = head + BLOCK_PAGES;
                continue;
            }
            for p in i..bend {
                if !self.kvms[vm].spte_present(p) {
                    continue;
                }
                if skip_pinned && self.folio_maybe_dma_pinned(mm, vma, p, 1) {
                    kept += 1;
                    continue;
                }
                self.kvms[vm].clear_spte(p);
                zapped += 1;
                refault.push((p, 1));
            }
            i = bend;
        }
        let st = &mut self.kvms[vm].stats;
        st.sptes_zapped += zapped;
        st.sptes_kept_pinned += kept;
        if let Some(s) = self.mms[mm].sampler {
            for (p, n) in refault {
                self.access_notify_invalidate(s, p, n, false);
            }
        }
        zapped
    }

    /// A vCPU thread's guest access to page `k` found no SPTE: VM exit, resolve the host page as
    /// GUP does (a first touch, or a NUMA hint fault on a PROT_NONE PTE since v6.5's
    /// FOLL_HONOR_NUMA_FAULT, then a write fault), and install the SPTE (huge over a PMD-mapped
    /// THP). Returns the cost, ns.
    // arch/x86/kvm/mmu/mmu.c: kvm_tdp_page_fault -> kvm_faultin_pfn (hva_to_pfn) -> kvm_tdp_mmu_map
    pub fn kvm_tdp_page_fault(&mut self, t: usize, vm: usize, k: u64) -> f64 {
        if self.kvms[vm].spte_present(k) {
            return 0.0; // mapped meanwhile (a huge SPTE over this page)
        }
        let (mm, vma) = (self.kvms[vm].mm, self.kvms[vm].memslot_vma);
        self.kvms[vm].stats.ept_violations += 1;
        let mut cost = self.cost.vm_exit_ns + self.cost.ept_violation_ns;
        if !self.mms[mm].vmas[vma].pt.populated(k) {
            match self.do_anonymous_page(t, vma, k) {
                Some(c) => cost += c,
                None => return cost, // out of memory
            }
        } else if self.mms[mm].vmas[vma].pt.protnone(k) {
            let st = &mut self.kvms[vm].stats;
            st.ept_hint_faults += 1;
            let (head, nr) = self.mms[mm].vmas[vma].pt.folio(k);
            if self.folio_maybe_dma_pinned(mm, vma, head, nr) {
                self.kvms[vm].stats.pinned_hint_faults += 1;
            }
            cost += self.do_numa_page(t, vma, k);
        }
        if !self.mms[mm].vmas[vma].pt.writable(k) {
            cost += self.do_wp_page(t, vma, k);
        }
        let pt = &self.mms[mm].vmas[vma].pt;
        if pt.pmd_mapped(k) {
            let head = k / BLOCK_PAGES * BLOCK_PAGES;
            (head..head + BLOCK_PAGES).for_each(|p| self.kvms[vm].set_spte(p));
        } else {
            self.kvms[vm].set_spte(k);
        }
        cost
    }
}

#[cfg(test)]
mod tests {
    use crate::kernel::Kernel;
    use crate::testutil::{small_kernel_from, SMALL};
    use crate::vmstat::VmEvent::*;

    /// A guest with 4 vCPUs (one per CPU of the 2x2 test machine), all running.
    fn guest(version: &str, features: &str, thp: &str, memory_mib: u64, pinned: f64) -> Kernel {
        let machine = SMALL.split("[[workload]]").next().unwrap();
        small_kernel_from(&format!(
            "{machine}[kernel]\nversion = \"{version}\"\n[kernel.features]\n{features}\n[kernel.thp]\nenabled = \"{thp}\"\n\
             [[workload]]\nkind = \"kvm_guest\"\nvcpus = 4\nmemory_mib = {memory_mib}\npinned_fraction = {pinned}\nduration_s = 5.0\nimage = \"none\"\n"
        ))
    }

    const BOTH_KVM: &str = "mmu-notifier-range-numa = true\nkvm-skip-pinned-zap = true";

    fn vcpu(k: &Kernel) -> usize {
        k.kvms[0].vcpus[0]
    }

    /// Fault guest pages [0, n) in through EPT violations (as the vCPUs' first accesses do).
    fn fault_in(k: &mut Kernel, n: u64) {
        let t = vcpu(k);
        for p in 0..n {
            k.kvm_tdp_page_fault(t, 0, p);
        }
        assert!((0..n).all(|p| k.kvms[0].spte_present(p)));
    }

    /// virt/kvm/kvm_main.c: kvm_mmu_notifier_invalidate_range_start — a NUMA scan chunk zaps the
    /// guest's SPTEs and flushes every other pCPU running a vCPU; the next access refaults, taking
    /// the host hint fault through GUP (FOLL_HONOR_NUMA_FAULT) and rebuilding the SPTE.
    #[test]
    fn notifier_zaps_flushes_and_the_guest_refaults() {
        let mut k = guest("6.12", "", "never", 64, 0.0);
        fault_in(&mut k, 512);
        let t = vcpu(&k);
        let st0 = k.kvms[0].stats.clone();
        let (changed, _) = k.change_prot_numa(t, 0, 0, 512);
        assert_eq!(changed, 512);
        let st = k.kvms[0].stats.clone();
        assert_eq!(st.numa_invalidations - st0.numa_invalidations, 1);
        assert_eq!(st.sptes_zapped - st0.sptes_zapped, 512);
        assert!((0..512).all(|p| !k.kvms[0].spte_present(p)));
        assert_eq!(st.numa_remote_tlb_flush - st0.numa_remote_tlb_flush, 1);
        assert_eq!(st.remote_tlb_flush_ipis - st0.remote_tlb_flush_ipis, 3, "the three other vCPUs are in guest mode");
        let hint = k.vmstat.get(NumaHintFaults);
        k.kvm_tdp_page_fault(t, 0, 7);
        assert_eq!(k.vmstat.get(NumaHintFaults) - hint, 1, "GUP took the host NUMA hint fault");
        assert_eq!(k.kvms[0].stats.ept_hint_faults - st.ept_hint_faults, 1);
        assert!(k.kvms[0].spte_present(7) && !k.kvms[0].spte_present(8));
    }

    /// Scan passes over guest RAM count from the first vCPU's start (`running_scan_passes`):
    /// invalidations while VFIO still pins RAM (no vCPU yet, so no SPTE) count in
    /// `scan_passes` only.
    #[test]
    fn passes_while_the_guest_runs_start_with_its_first_vcpu() {
        use crate::sched::task::TaskState;
        let mut k = guest("6.4", "", "never", 64, 0.0);
        fault_in(&mut k, 512);
        let (t, vcpus) = (vcpu(&k), k.kvms[0].vcpus.clone());
        let states: Vec<TaskState> = vcpus.iter().map(|&v| k.tasks[v].state).collect();
        vcpus.iter().for_each(|&v| k.tasks[v].state = TaskState::NotStarted);
        k.change_prot_numa(t, 0, 0, 512);
        let st = &k.kvms[0].stats;
        assert_eq!((st.numa_invalidated_pages, st.numa_invalidated_pages_running), (512, 0));
        k.tasks[vcpus[1]].state = states[1];
        k.change_prot_numa(t, 0, 0, 512);
        let st = &k.kvms[0].stats;
        assert_eq!((st.numa_invalidated_pages, st.numa_invalidated_pages_running), (1024, 512));
        let len = k.mms[k.kvms[0].mm].vmas[k.kvms[0].memslot_vma].pt.len() as f64;
        assert_eq!(k.kvms[0].running_scan_passes(&k), 512.0 / len);
    }

    /// spec §1.7: the notifier fires before the PTE skips — a fully pinned 4 KiB guest in a COW
    /// mapping (v4.19+ skips pinned pages) changes no PTE, yet KVM still zaps and flushes.
    #[test]
    fn notifier_fires_even_when_no_pte_changes() {
        let mut k = guest("6.4", "", "never", 64, 1.0);
        fault_in(&mut k, 512);
        let t = vcpu(&k);
        let (changed, _) = k.change_prot_numa(t, 0, 0, 512);
        assert_eq!(changed, 0, "pinned pages are skipped (page_count != 1)");
        assert_eq!(k.kvms[0].stats.sptes_zapped, 512);
        assert_eq!(k.kvms[0].stats.numa_remote_tlb_flush, 1);
    }

    /// seed 004 patch 2/3 on its own (`numa-skip-pinned`): a pinned THP is no longer made
    /// PROT_NONE (change_huge_pmd had no pin check), but KVM, unaware, still zaps it.
    #[test]
    fn skip_pinned_alone_keeps_the_pmd_but_not_the_spte() {
        for (features, protected) in [("", 512), ("numa-skip-pinned = true", 0)] {
            let mut k = guest("6.4", features, "always", 64, 1.0);
            fault_in(&mut k, 512);
            let t = vcpu(&k);
            let huge = k.vmstat.get(NumaHugePteUpdates);
            let (changed, _) = k.change_prot_numa(t, 0, 0, 512);
            assert_eq!(changed, protected, "{features}");
            assert_eq!(k.vmstat.get(NumaHugePteUpdates) - huge, protected / 512);
            assert_eq!(k.kvms[0].stats.sptes_zapped, 1, "one huge SPTE zapped ({features})");
            assert_eq!(k.kvms[0].stats.numa_remote_tlb_flush, 1);
        }
    }

    /// seed 004 patches 1/3 + 3/3 (`mmu-notifier-range-numa`, `kvm-skip-pinned-zap`): KVM keeps
    /// the SPTEs of pinned pages for NUMA invalidations, so nothing is flushed; the host still
    /// protects the pinned THP. A non-NUMA invalidation (migration's MMU_NOTIFY_CLEAR) still zaps.
    #[test]
    fn kvm_skip_zap_alone_keeps_sptes_of_pinned_pages() {
        let mut k = guest("6.4", BOTH_KVM, "always", 64, 1.0);
        fault_in(&mut k, 1024);
        let t = vcpu(&k);
        let (changed, _) = k.change_prot_numa(t, 0, 0, 1024);
        assert_eq!(changed, 1024, "the host PMDs are still protected");
        let st = k.kvms[0].stats.clone();
        assert_eq!((st.sptes_zapped, st.sptes_kept_pinned, st.remote_tlb_flush_requests), (0, 2, 0));
        assert!(k.kvms[0].spte_present(0) && k.kvms[0].spte_present(1023));
        k.mmu_notifier_clear(k.kvms[0].mm, 0, 0, 512, 0);
        assert_eq!(k.kvms[0].stats.sptes_zapped, 1);
        assert!(!k.kvms[0].spte_present(0) && k.kvms[0].spte_present(512));
    }

    /// A guest pinned in part: with the RFC, only the unpinned pages lose their SPTEs.
    #[test]
    fn partly_pinned_guest_zaps_only_unpinned_pages() {
        let mut k = guest("6.4", &format!("numa-skip-pinned = true\n{BOTH_KVM}"), "never", 64, 0.5);
        let half = 64 * 256 / 2;
        fault_in(&mut k, 2 * half);
        // (the last pages faulted in wait in an LRU add batch, which the 6.4 scanner also
        // passes by: page_count != 1; drained here to look at pins alone)
        k.lru_add_drain_all();
        let t = vcpu(&k);
        let (changed, _) = k.change_prot_numa(t, 0, 0, 2 * half);
        assert_eq!(changed, half, "only the unpinned half is protected");
        assert_eq!((k.kvms[0].stats.sptes_zapped, k.kvms[0].stats.sptes_kept_pinned), (half, half));
        assert!(k.kvms[0].spte_present(0) && !k.kvms[0].spte_present(half));
    }

    /// mm/mprotect.c: up to v6.11 change_pmd_range starts one invalidation per 1 GiB (PUD) region
    /// with page tables; v6.12 (`mmu-notifier-pud`) one per 512 GiB.
    #[test]
    fn notifier_granularity_follows_the_kernel_version() {
        for (version, expected) in [("6.4", 2), ("6.12", 1)] {
            let mut k = guest(version, "", "never", 1536, 0.0);
            let t = vcpu(&k);
            let start = k.mms[k.kvms[0].mm].vmas[0].start;
            let boundary = (start / (1 << 18) + 1) * (1 << 18) - start;
            for p in [0, boundary + 512] {
                k.kvm_tdp_page_fault(t, 0, p);
            }
            let before = k.kvms[0].stats.numa_invalidations;
            k.change_prot_numa(t, 0, 0, boundary + 1024);
            assert_eq!(k.kvms[0].stats.numa_invalidations - before, expected, "{version}");
        }
    }
}

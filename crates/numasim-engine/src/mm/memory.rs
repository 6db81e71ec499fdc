//! Page faults (mm/memory.c): first touch, NUMA hinting faults, write-protect faults.
//!
//! Each function returns the system time (ns) the fault cost the faulting task.

use crate::features::Feature;
use crate::kernel::Kernel;
use crate::mm::access_notifier::AccessNotifier;
use crate::mm::huge_memory::HPAGE_PMD_ORDER;
use crate::mm::mempolicy::Mempolicy;
use crate::mm::pgtable::{PTE_DIRTY, PTE_WRITE};
use crate::mm::types::{VM_SHARED, VM_WRITE};
use crate::sched::numa::fault::{TNF_FAULT_LOCAL, TNF_MIGRATED, TNF_MIGRATE_FAIL, TNF_NO_GROUP, TNF_SHARED};
use crate::vmstat::VmEvent;

impl Kernel {
    /// First touch of an anonymous page: allocate a folio (a THP or mTHP where the VMA and the
    /// sysfs settings allow, else a base page) under the VMA's or task's policy and zero it.
    // mm/memory.c: do_anonymous_page
    pub fn do_anonymous_page(&mut self, t: usize, vma: usize, idx: u64) -> Option<f64> {
        self.map_new_anon_folio(t, vma, idx, true)
    }

    /// `n` first accesses that are loads map the shared zero page read-only: faults, but no
    /// allocation and nothing for NUMA balancing (the scanner skips the zero page), so they
    /// are counted together; the first store copies the page (`do_wp_zero_page`). The
    /// zero-page PTE itself is not recorded. Returns their time, ns.
    // mm/memory.c: do_anonymous_page ("Use the zero-page for reads")
    pub fn do_anonymous_reads(&mut self, n: u64) -> f64 {
        self.count(VmEvent::Pgfault, n);
        n as f64 * self.cost.fault_entry_exit_ns
    }

    /// A store to a zero-page PTE: a new zeroed base page (order 0 whatever the mTHP settings)
    /// under the VMA's or task's policy replaces it.
    // mm/memory.c: do_wp_page -> wp_page_copy (is_zero_pfn: vma_alloc_zeroed_movable_folio)
    pub fn do_wp_zero_page(&mut self, t: usize, vma: usize, idx: u64) -> Option<f64> {
        self.map_new_anon_folio(t, vma, idx, false)
    }

    fn map_new_anon_folio(&mut self, t: usize, vma: usize, idx: u64, large: bool) -> Option<f64> {
        if let Some((head, order, node)) = large.then(|| self.alloc_anon_folio(t, vma, idx)).flatten() {
            return Some(self.map_anon_folio(t, vma, head, order, node));
        }
        let pol = self.vma_policy(t, vma);
        self.map_anon_base_page(t, vma, idx, &pol)
    }

    /// A new zeroed base page for page `idx` under `pol` (the VMA's or task's policy), mapped
    /// writable; None (and `oom` set) when no node can give one, even after direct reclaim,
    /// whose time is part of the fault's.
    pub fn map_anon_base_page(&mut self, t: usize, vma: usize, idx: u64, pol: &Mempolicy) -> Option<f64> {
        let mut reclaim_ns = 0.0;
        let Some(node) = self.alloc_page(pol, self.tasks[t].cpu, &mut reclaim_ns) else {
            self.oom_no_page(t, pol);
            return None;
        };
        Some(self.map_anon_folio(t, vma, idx, 0, node) + reclaim_ns)
    }

    /// No node under `pol` can give task `t` a page and direct reclaim could not demote: the
    /// run stops with the simulated OOM (mm/page_alloc.c: __alloc_pages_may_oom).
    pub fn oom_no_page(&mut self, t: usize, pol: &Mempolicy) {
        let task = &self.tasks[t];
        let (_, mask) = pol.alloc_nodes(self.topo.cpu_node[task.cpu], self.topo.nr_nodes);
        let nodes: Vec<usize> = (0..self.topo.nr_nodes).filter(|n| mask & (1 << n) != 0).collect();
        let full: Vec<String> = nodes.iter().map(|&n| format!("node {n} ({:.2} GiB)", self.nodes[n].present as f64 / 262144.0)).collect();
        let verb = if full.len() == 1 { "is" } else { "are" };
        let mut why: Vec<String> = nodes.iter().map(|&n| self.why_no_demotion(n)).collect();
        why.dedup();
        self.oom =
            Some(format!("no free page for pid {} ({}) under {}: {} {verb} full, and direct reclaim could not demote: {}", task.pid, task.comm, pol.describe(), full.join(", "), why.join("; ")));
    }

    /// A fault on an unmapped page: a shared mapping's page comes from its file (mm/shmem.rs),
    /// by a load with fault-around, by a store alone; an anonymous one is allocated (a first
    /// access is taken as a store: streams store, and the zero page of a load is its own path).
    // mm/memory.c: do_pte_missing -> do_anonymous_page / do_fault (do_read_fault, do_shared_fault)
    pub fn do_pte_missing(&mut self, t: usize, vma: usize, idx: u64, store: bool) -> Option<f64> {
        match self.mms[self.tasks[t].mm].vmas[vma].shmem {
            Some(file) if store => self.shmem_fault(t, vma, file, idx),
            Some(file) => self.shmem_read_fault(t, vma, file, idx),
            None => self.do_anonymous_page(t, vma, idx),
        }
    }

    /// TNF_SHARED for a hint fault on page `idx`: the VMA is VM_SHARED and the folio is mapped
    /// by more than one process (spec §2.3), which lets task_numa_group join processes.
    // mm/memory.c: numa_migrate_check (do_numa_page before 6.12)
    pub fn tnf_shared(&self, mm: usize, vma: usize, idx: u64) -> u32 {
        let shared = self.mms[mm].vmas[vma].flags & VM_SHARED != 0 && self.folio_likely_mapped_shared(mm, vma, idx);
        if shared {
            TNF_SHARED
        } else {
            0
        }
    }

    /// Map a freshly allocated folio of 2^`order` pages at `head` on `node`, writable and dirty
    /// (set_pte_range / set_pmd); returns the fault's time (entry, exit, zeroing).
    fn map_anon_folio(&mut self, t: usize, vma: usize, head: u64, order: u8, node: usize) -> f64 {
        let mm = self.tasks[t].mm;
        let nr = 1u64 << order;
        let m = &mut self.mms[mm];
        m.vmas[vma].pt.populate_folio(head, order, node, PTE_WRITE | PTE_DIRTY, order == HPAGE_PMD_ORDER);
        m.node_pages[node] += nr;
        self.folio_add_lru(self.tasks[t].cpu, mm, vma, head, order);
        for i in head..head + nr {
            self.access_notify_populated(mm, vma, i, node);
        }
        self.count(VmEvent::Pgfault, 1);
        self.cost.fault_entry_exit_ns + self.cost.clear_page_ns * nr as f64
    }

    /// Write to a present read-only PTE of an exclusive anonymous page: reuse it, no copy.
    /// A PMD-mapped THP is made writable whole; a page shared since a fork is copied.
    // mm/memory.c: do_wp_page (wp_page_reuse; wp_page_copy in mm/cow.rs)
    pub fn do_wp_page(&mut self, t: usize, vma: usize, idx: u64) -> f64 {
        let mm = self.tasks[t].mm;
        if self.mms[mm].vmas[vma].pt.pmd_mapped(idx) {
            return self.do_huge_pmd_wp_page(t, vma, idx);
        }
        if self.mms[mm].vmas[vma].pt.cow(idx) {
            return self.wp_page_copy(t, vma, idx);
        }
        self.mms[mm].vmas[vma].pt.make_writable(idx);
        self.count(VmEvent::Pgfault, 1);
        self.cost.fault_entry_exit_ns
    }

    /// Count one NUMA hinting fault on a page of node `nid` taken on `cpu`; TNF_FAULT_LOCAL if
    /// the page is on the CPU's node.
    // mm/memory.c: numa_migrate_check (NUMA_HINT_FAULTS, NUMA_HINT_FAULTS_LOCAL)
    pub(crate) fn count_hint_fault(&mut self, nid: usize, cpu: usize) -> u32 {
        self.count(VmEvent::Pgfault, 1);
        self.count(VmEvent::NumaHintFaults, 1);
        self.events.hint_faults += 1;
        if nid == self.cpu_node(cpu) {
            self.count(VmEvent::NumaHintFaultsLocal, 1);
            TNF_FAULT_LOCAL
        } else {
            0
        }
    }

    /// A second thread faults on a PROT_NONE PTE whose folio the first thread has isolated:
    /// migrate_misplaced_folio_prepare fails (folio_isolate_lru), so it records TNF_MIGRATE_FAIL
    /// and maps the page; the first thread's unmap then finds an accessible PTE and must flush.
    /// Its time is taken from the second thread. Returns 0 (the first thread pays nothing here).
    // mm/memory.c: do_numa_page (the race described in b99a342d4f11)
    pub fn racing_numa_fault(&mut self, other: usize, vma: usize, idx: u64, writable: bool) -> f64 {
        let (mm, cpu) = (self.tasks[other].mm, self.tasks[other].cpu);
        let (head, nr) = self.mms[mm].vmas[vma].pt.folio(idx);
        let nid = self.mms[mm].vmas[vma].pt.nid(head) as usize;
        let last_cpupid = self.mms[mm].vmas[vma].pt.last_cpupid(head);
        self.vma_set_access_pid_bit(mm, vma, self.tasks[other].pid);
        let flags = TNF_MIGRATE_FAIL | self.count_hint_fault(nid, cpu);
        self.numa_rebuild_mapping(mm, vma, head, nr, writable);
        let cost = self.cost.fault_entry_exit_ns + self.cost.hint_fault_ns;
        self.tasks[other].sys_ns += cost;
        self.tasks[other].sys_debt_ns += cost;
        self.task_numa_fault(other, last_cpupid, nid, nr, flags);
        0.0
    }

    /// Whether a hint fault must not join or create a numa_group (spec §2.5): by VMA flags
    /// (4.0-4.8), by pte_dirty (4.0-rc2 to rc4), else by the write bit of the restored PTE
    /// (3.19 with _PAGE_NUMA, 4.9+), which is never set when the fault drops it (4.0-rc1).
    // mm/memory.c: do_numa_page (TNF_NO_GROUP)
    pub fn numa_no_group(&self, mm: usize, vma: usize, idx: u64, pte_write: bool) -> bool {
        let v = &self.mms[mm].vmas[vma];
        if self.feature(Feature::GroupByVmaFlags) {
            v.flags & VM_WRITE == 0
        } else if self.feature(Feature::GroupByPteDirty) {
            !v.pt.dirty(idx)
        } else {
            !pte_write
        }
    }

    /// Restore the PROT_NONE PTEs of the folio at [head, head + nr): one PTE for a base page,
    /// every PTE of a large folio (numa_rebuild_large_mapping), the PMD of a THP.
    // mm/memory.c: numa_rebuild_single_mapping / numa_rebuild_large_mapping
    fn numa_rebuild_mapping(&mut self, mm: usize, vma: usize, head: u64, nr: u64, write: bool) {
        let pt = &mut self.mms[mm].vmas[vma].pt;
        for i in head..head + nr {
            if pt.protnone(i) {
                pt.make_present(i, write);
            }
        }
    }

    /// NUMA hinting fault on a PROT_NONE PTE or PMD (v6.11+ shape; spec §2.2, §2.6-§2.8): a
    /// large folio is handled whole, one hint fault for all its pages.
    // mm/memory.c: do_numa_page; mm/huge_memory.c: do_huge_pmd_numa_page
    pub fn do_numa_page(&mut self, t: usize, vma: usize, idx: u64) -> f64 {
        let (mm, cpu) = (self.tasks[t].mm, self.tasks[t].cpu);
        let this_node = self.cpu_node(cpu);
        let mut sys = self.cost.fault_entry_exit_ns + self.cost.hint_fault_ns;
        let v = &self.mms[mm].vmas[vma];
        // can_change_pte_writable: private writable VMA, exclusive anonymous page (not one
        // shared copy-on-write since a fork)
        let writable = v.flags & VM_WRITE != 0 && !v.pt.cow(idx);
        let (head, nr) = v.pt.folio(idx);
        let pmd = v.pt.pmd_mapped(idx);
        // a shared mapping's vm_page_prot carries the write bit (no write-notify for shmem), so
        // pte_modify restores it writable whatever the release does with the saved write bit,
        // after a failed migration too
        let shared = v.flags & VM_SHARED != 0;
        let preserve = self.feature(Feature::NumaPreserveWrite) || shared;
        if nr > 1 && !pmd && !self.feature(Feature::NumaMthp) {
            // <= v6.9: "TODO: handle PTE-mapped THP" -> out_map, before any NUMA accounting
            self.count(VmEvent::Pgfault, 1);
            self.mms[mm].vmas[vma].pt.make_present(idx, writable && preserve);
            return sys;
        }
        if nr > 1 {
            sys += self.cost.pte_update_ns * nr as f64;
        }
        let mut flags = self.tnf_shared(mm, vma, idx);
        if self.numa_no_group(mm, vma, idx, writable && preserve) {
            flags |= TNF_NO_GROUP;
        }
        let pt = &self.mms[mm].vmas[vma].pt;
        let nid = pt.nid(head) as usize;
        // numa_migrate_check: read last_cpupid before mpol_misplaced updates it; a slow-tier
        // folio's holds its access time, read as unset
        let last_cpupid = if self.folio_use_access_time(nid) { crate::mm::pgtable::CPUPID_UNSET } else { pt.last_cpupid(head) };
        let pid = self.tasks[t].pid;
        self.vma_set_access_pid_bit(mm, vma, pid);
        flags |= self.count_hint_fault(nid, cpu);
        let target = self.mpol_misplaced(t, vma, head, nid);
        // the PMD path always migrated before remapping; the PTE path since v5.13
        let delay_map = self.feature(Feature::NumaDelayMap) || pmd;
        if !delay_map {
            // <= v5.12: the PTE is made accessible before migration is tried
            self.numa_rebuild_mapping(mm, vma, head, nr, writable && preserve);
        }
        let mut mem_node = nid;
        if let Some(target) = target {
            if !self.migrate_misplaced_folio_prepare(mm, vma, head, target, nr) {
                flags |= TNF_MIGRATE_FAIL;
            } else {
                if delay_map {
                    let window = self.cost.migrate_page_ns + nr as f64 * self.page_copy_ns(this_node, nid, target);
                    if let Some(other) = self.access_concurrent_fault(t, vma, idx, window) {
                        sys += self.racing_numa_fault(other, vma, idx, writable && preserve);
                    }
                }
                let (migrated, cost) = self.migrate_misplaced_folio(t, vma, head, target);
                sys += cost;
                if migrated {
                    flags |= TNF_MIGRATED;
                    mem_node = target;
                } else {
                    flags |= TNF_MIGRATE_FAIL;
                }
            }
        }
        if delay_map && flags & TNF_MIGRATED == 0 {
            // out_map: restore the PTE; since 6.3 the write bit is re-derived, and dropped after
            // a failure; before, the saved write bit of the PROT_NONE PTE comes back (savedwrite)
            let w = writable && preserve && (shared || flags & TNF_MIGRATE_FAIL == 0 || !self.feature(Feature::NumaDropSavedwrite));
            self.numa_rebuild_mapping(mm, vma, head, nr, w);
        }
        self.task_numa_fault(t, last_cpupid, mem_node, nr, flags);
        sys
    }
}

#[cfg(test)]
mod tests {
    use crate::sched::numa::fault::cpu_pid_to_cpupid;
    use crate::testutil::{pin, place_page, small_kernel, thread};
    use crate::vmstat::VmEvent::*;

    fn protnone_page(k: &mut crate::kernel::Kernel, idx: u64, node: usize) {
        place_page(k, idx, node);
        k.mms[0].vmas[0].pt.make_protnone(idx);
    }

    /// mm/memory.c: do_numa_page — a fault on a page already on this node counts as local and
    /// restores the PTE writable (numa_rebuild_single_mapping with `writable`).
    #[test]
    fn local_hint_fault_restores_writable_pte() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        pin(&mut k, t, 0);
        protnone_page(&mut k, 10, 0);
        k.do_numa_page(t, 0, 10);
        assert_eq!((k.vmstat.get(NumaHintFaults), k.vmstat.get(NumaHintFaultsLocal)), (1, 1));
        assert_eq!(k.vmstat.get(NumaPagesMigrated), 0);
        let pt = &k.mms[0].vmas[0].pt;
        assert!(!pt.protnone(10) && pt.writable(10));
    }

    /// mm/memory.c: do_numa_page (v5.13+, numa-delay-map) — the PTE stays PROT_NONE while the
    /// page migrates, so no TLB flush; the new PTE comes from a read-only exclusive migration
    /// entry, so the next write takes a write-protect fault.
    #[test]
    fn delayed_map_migrates_without_tlb_flush() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        pin(&mut k, t, 2);
        protnone_page(&mut k, 11, 0);
        let used = (k.nodes[0].used, k.nodes[1].used);
        k.do_numa_page(t, 0, 11);
        let pt = &k.mms[0].vmas[0].pt;
        assert_eq!(pt.nid(11), 1);
        assert!(!pt.protnone(11) && !pt.writable(11));
        assert_eq!((k.vmstat.get(NumaPagesMigrated), k.vmstat.get(PgmigrateSuccess)), (1, 1));
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush), 0);
        assert_eq!((k.nodes[0].used, k.nodes[1].used), (used.0 - 1, used.1 + 1), "pages conserved");
    }

    /// mm/migrate.c: try_to_migrate_one (v5.13-v6.2) — the PROT_NONE PTE still holds the write
    /// bit (x86 savedwrite is _PAGE_RW), so the migration entry is writable and the page comes
    /// back writable: no write fault after a delayed-map migration until 6.3 (6a56ccbcf6c6).
    #[test]
    fn savedwrite_kernels_migrate_protnone_pages_writable() {
        let mut k = small_kernel("[kernel]\nversion = \"5.13\"");
        let t = thread(&k, 0);
        pin(&mut k, t, 2);
        protnone_page(&mut k, 11, 0);
        k.do_numa_page(t, 0, 11);
        let pt = &k.mms[0].vmas[0].pt;
        assert_eq!(pt.nid(11), 1);
        assert!(!pt.protnone(11) && pt.writable(11));
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush), 0, "still no flush: the PTE was never accessible");
    }

    /// mm/memory.c: do_numa_page (<= v5.12) — the PTE is made accessible before migration, so
    /// try_to_unmap must flush it: one IPI round to every other CPU running the mm.
    #[test]
    fn map_first_order_flushes_per_migrated_page() {
        let mut k = small_kernel("[kernel.features]\nnuma-delay-map = false\nmigrate-batch-flush = false");
        let t = thread(&k, 0);
        pin(&mut k, t, 2);
        protnone_page(&mut k, 12, 0);
        k.do_numa_page(t, 0, 12);
        assert_eq!(k.mms[0].vmas[0].pt.nid(12), 1);
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush), 1);
        assert_eq!(k.vmstat.get(NrTlbRemoteFlushReceived), 3, "the three other CPUs run threads of this mm");
        assert_eq!(k.vmstat.get(NrTlbLocalFlushOne), 1);
    }

    /// v6.3 regression (7e12beb8ca2a): the batched unmap deferred a flush even for a PROT_NONE
    /// PTE, so every NUMA-fault migration cost an IPI round to every non-lazy CPU of the mm;
    /// 4d4b6d66db63 (v6.4, migrate-skip-inaccessible-flush) skips it.
    #[test]
    fn v6_3_flushed_inaccessible_ptes_v6_4_does_not() {
        for (skip, rounds) in [("false", 1), ("true", 0)] {
            let mut k = small_kernel(&format!("[kernel.features]\nmigrate-skip-inaccessible-flush = {skip}"));
            let t = thread(&k, 0);
            pin(&mut k, t, 2);
            protnone_page(&mut k, 17, 0);
            k.do_numa_page(t, 0, 17);
            assert_eq!(k.mms[0].vmas[0].pt.nid(17), 1);
            assert_eq!(k.vmstat.get(NrTlbRemoteFlush), rounds, "skip-inaccessible = {skip}");
            assert_eq!(k.vmstat.get(NrTlbRemoteFlushReceived), 3 * rounds);
        }
    }

    /// mm/migrate.c: migrate_misplaced_folio_prepare — a target node without free pages above
    /// the high watermark refuses; the fault records TNF_MIGRATE_FAIL and maps the page back
    /// read-only (ignore_writable).
    #[test]
    fn migration_refused_below_high_watermark() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        pin(&mut k, t, 2);
        k.tasks[t].numa.migrate_retry = u64::MAX;
        protnone_page(&mut k, 13, 0);
        k.nodes[1].used = k.nodes[1].present - k.nodes[1].wmark_high; // free == high watermark
        let held = k.nodes[1].used;
        k.do_numa_page(t, 0, 13);
        let pt = &k.mms[0].vmas[0].pt;
        assert_eq!(pt.nid(13), 0);
        assert!(!pt.protnone(13) && !pt.writable(13));
        assert_eq!(k.tasks[t].numa.faults_locality[2], 1);
        assert_eq!(k.nodes[1].used, held);
        assert_eq!(k.vmstat.get(NumaPagesMigrated), 0);
    }

    /// numa-preserve-write off (3.19 / 4.0-rc): the hinting fault does not restore the write
    /// bit, so a store right after it takes a second fault.
    #[test]
    fn without_preserve_write_a_store_faults_again() {
        for (feature, faults) in [("true", 1), ("false", 2)] {
            let mut k = small_kernel(&format!("[kernel.features]\nnuma-preserve-write = {feature}"));
            let t = thread(&k, 0);
            pin(&mut k, t, 0);
            protnone_page(&mut k, 14, 0);
            let before = k.vmstat.get(Pgfault);
            k.do_numa_page(t, 0, 14);
            if !k.mms[0].vmas[0].pt.writable(14) {
                k.do_wp_page(t, 0, 14);
            }
            assert_eq!(k.vmstat.get(Pgfault) - before, faults, "preserve-write = {feature}");
        }
    }

    /// mm/mempolicy.c: mpol_misplaced — a local fault returns before should_numa_migrate_memory,
    /// so the page's last_cpupid is not updated.
    #[test]
    fn local_fault_leaves_last_cpupid_alone() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        pin(&mut k, t, 0);
        protnone_page(&mut k, 15, 0);
        let stamp = cpu_pid_to_cpupid(3, 99);
        k.mms[0].vmas[0].pt.set_last_cpupid(15, stamp);
        k.do_numa_page(t, 0, 15);
        assert_eq!(k.mms[0].vmas[0].pt.last_cpupid(15), stamp);
    }

    /// mm/mempolicy.c: mpol_misplaced — MPOL_BIND without MPOL_F_NUMA_BALANCING has no
    /// MPOL_F_MOF: never misplaced.
    #[test]
    fn bind_policy_without_mof_never_migrates() {
        let mut k = small_kernel("");
        let t = thread(&k, 0);
        pin(&mut k, t, 2);
        k.tasks[t].policy = crate::mm::mempolicy::Mempolicy::bind(0b01);
        place_page(&mut k, 16, 0);
        assert_eq!(k.mpol_misplaced(t, 0, 16, 0), None);
    }

    fn thp_kernel(thp: &str) -> crate::kernel::Kernel {
        small_kernel(&format!("[kernel.thp]\n{thp}"))
    }

    /// mm/memory.c: do_numa_page (v6.10+, numa_rebuild_large_mapping) — the first hint fault on
    /// any page of a large folio restores all its PTEs: one hint fault, the folio's pages passed
    /// to task_numa_fault.
    #[test]
    fn hint_fault_restores_the_whole_large_folio() {
        let mut k = thp_kernel("sizes = { \"64K\" = \"always\" }");
        let t = thread(&k, 0);
        let node = k.mms[0].vmas[0].pt.nid(40) as usize;
        pin(&mut k, t, 2 * node); // a CPU on the folio's node: no migration
        k.change_protection_prot_numa(t, 0, 32, 48);
        let before = k.tasks[t].numa.faults_locality;
        k.do_numa_page(t, 0, 40);
        let pt = &k.mms[0].vmas[0].pt;
        assert_eq!(pt.count_protnone(32, 16), 0);
        assert!((32..48).all(|i| pt.writable(i)));
        assert_eq!(k.vmstat.get(NumaHintFaults), 1);
        let after = k.tasks[t].numa.faults_locality;
        assert_eq!(after[1] - before[1], 16, "task_numa_fault gets folio_nr_pages, all local");
    }

    /// mm/huge_memory.c: do_huge_pmd_numa_page — one hint fault per PMD; a misplaced THP moves
    /// whole (512 numa_pages_migrated, one thp_migration_success) and its PMD is flushed.
    #[test]
    fn pmd_thp_hint_fault_migrates_512_pages() {
        let mut k = thp_kernel("enabled = \"always\"");
        let t = thread(&k, 0);
        let node = k.mms[0].vmas[0].pt.nid(600) as usize;
        pin(&mut k, t, 2 * (1 - node));
        k.tasks[t].numa.migrate_retry = u64::MAX;
        k.change_protection_prot_numa(t, 0, 512, 1024);
        let used = (k.nodes[0].used, k.nodes[1].used);
        k.do_numa_page(t, 0, 600);
        let pt = &k.mms[0].vmas[0].pt;
        assert!((512..1024).all(|i| pt.nid(i) as usize == 1 - node && !pt.protnone(i)));
        assert!(pt.pmd_mapped(600) && pt.pmd_blocks_whole());
        assert_eq!((k.vmstat.get(NumaHintFaults), k.vmstat.get(NumaPagesMigrated)), (1, 512));
        assert_eq!(k.vmstat.get(ThpMigrationSuccess), 1);
        assert_eq!(k.vmstat.get(NrTlbRemoteFlush), 1, "pmdp_invalidate flushes at once");
        let moved = |u: (u64, u64)| {
            if node == 0 {
                (u.0 - 512, u.1 + 512)
            } else {
                (u.0 + 512, u.1 - 512)
            }
        };
        assert_eq!((k.nodes[0].used, k.nodes[1].used), moved(used), "pages conserved");
        // the PMD came back read-only: one write fault makes all 512 pages writable
        let faults = k.vmstat.get(Pgfault);
        k.do_wp_page(t, 0, 700);
        assert_eq!(k.vmstat.get(Pgfault) - faults, 1);
        assert!((512..1024).all(|i| k.mms[0].vmas[0].pt.writable(i)));
    }

    /// mm/memory.c: do_numa_page (<= v6.9) — a PTE-mapped large folio is never migrated
    /// ("TODO: handle PTE-mapped THP"): the PTE is restored with no NUMA accounting.
    #[test]
    fn before_6_10_large_folio_faults_only_restore_the_pte() {
        let mut k = small_kernel("[kernel]\nversion = \"6.9\"\n[kernel.thp]\nsizes = { \"16K\" = \"always\" }");
        let t = thread(&k, 0);
        let node = k.mms[0].vmas[0].pt.nid(8) as usize;
        pin(&mut k, t, 2 * (1 - node));
        k.mms[0].vmas[0].pt.make_protnone(9);
        k.do_numa_page(t, 0, 9);
        assert!(!k.mms[0].vmas[0].pt.protnone(9));
        assert_eq!(k.mms[0].vmas[0].pt.nid(9) as usize, node);
        assert_eq!((k.vmstat.get(NumaHintFaults), k.vmstat.get(NumaPagesMigrated)), (0, 0));
    }
}

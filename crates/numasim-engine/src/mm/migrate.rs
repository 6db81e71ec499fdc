//! Page migration (mm/migrate.c): `migrate_pages()` one folio at a time (<= v6.2) or in batches
//! of up to 512 pages with one TLB flush per batch (`migrate-batch-flush`, v6.3), and the
//! NUMA-fault entry points. A `PageRef` stands for the folio holding that page; large folios
//! move whole (counters in base pages, `thp_migration_*` per PMD-sized folio).

use crate::arch::x86::tlb::TlbBatch;
use crate::features::Feature;
use crate::kernel::Kernel;
use crate::mm::access_notifier::AccessNotifier;
use crate::mm::pgtable::BLOCK_PAGES;
use crate::mm::rmap::PageRef;
use crate::mm::types::VM_WRITE;
use crate::variants::MigrationDirty;
use crate::vmstat::VmEvent;

/// NR_MAX_BATCHED_MIGRATION (= HPAGE_PMD_NR)
pub const NR_MAX_BATCHED_MIGRATION: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrateMode {
    /// MIGRATE_ASYNC (NUMA hinting faults)
    Async,
    /// MIGRATE_SYNC (migrate_pages(2), move_pages(2))
    Sync,
}

/// What one `migrate_pages()` call did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MigrateOutcome {
    pub succeeded: u64,
    pub failed: u64,
    /// System time of the calling task, ns.
    pub cost: f64,
}

impl Kernel {
    /// Migrate `pages` to `target` on behalf of a task on `cpu`.
    // mm/migrate.c: migrate_pages
    pub fn migrate_pages(&mut self, pages: &[PageRef], target: usize, cpu: usize, mode: MigrateMode) -> MigrateOutcome {
        let mut out = MigrateOutcome::default();
        // tracepoints.rs: the call's reason, its pages under its first page's node
        let traced = match (self.trace.tracepoints.is_some(), pages.first()) {
            (true, Some(p)) => {
                let src = self.mms[p.mm].vmas[p.vma].pt.nid(p.idx) as usize;
                Some((self.migrate_reason(mode, src, target), src))
            }
            _ => None,
        };
        let mut split = Vec::new();
        self.migrate_list(pages, target, cpu, mode, &mut split, &mut out);
        // the base pages of large folios split for -ENOMEM, after the rest of the list
        self.migrate_list(&split, target, cpu, mode, &mut Vec::new(), &mut out);
        self.count(VmEvent::PgmigrateSuccess, out.succeeded);
        self.count(VmEvent::PgmigrateFail, out.failed);
        if let Some((reason, src)) = traced {
            self.trace_migrate(reason, src, target, out.succeeded, out.failed);
        }
        out
    }

    /// One pass of `migrate_pages` over a list; folios it splits join `split`.
    fn migrate_list(&mut self, pages: &[PageRef], target: usize, cpu: usize, mode: MigrateMode, split: &mut Vec<PageRef>, out: &mut MigrateOutcome) {
        if self.feature(Feature::MigrateBatchFlush) {
            // migrate_pages_sync first tries the batch in ASYNC mode and retries failures one
            // by one, except -ENOMEM, the only failure modelled here: so both modes batch.
            // A batch closes once it holds NR_MAX_BATCHED_MIGRATION base pages.
            let mut start = 0;
            let mut held = 0;
            for (i, &p) in pages.iter().enumerate() {
                held += self.folio_nr(p);
                if held >= NR_MAX_BATCHED_MIGRATION as u64 || i + 1 == pages.len() {
                    self.migrate_pages_batch(&pages[start..=i], target, cpu, mode, split, out);
                    start = i + 1;
                    held = 0;
                }
            }
        } else {
            for &p in pages {
                self.unmap_and_move(p, target, cpu, mode, split, out);
            }
        }
    }

    /// Unmap every page (deferring flushes), one flush, then copy and remap every page.
    // mm/migrate.c: migrate_pages_batch
    fn migrate_pages_batch(&mut self, chunk: &[PageRef], target: usize, cpu: usize, mode: MigrateMode, split: &mut Vec<PageRef>, out: &mut MigrateOutcome) {
        let mut batch = TlbBatch::default();
        let mut unmapped = Vec::with_capacity(chunk.len());
        let mut unmap_at = Vec::new();
        for (i, &p) in chunk.iter().enumerate() {
            if self.folio_extra_refs(p) {
                out.cost += self.cost.migrate_page_ns;
                self.migrate_failed(p, out);
                continue;
            }
            let Some(node) = self.alloc_migration_target(target, cpu, self.folio_order(p)) else {
                if self.try_split_folio(p, mode, cpu, split, out) {
                    continue;
                }
                // -ENOMEM: stop the unmap phase, move what is unmapped
                for &q in &chunk[i..] {
                    self.migrate_failed(q, out);
                }
                break;
            };
            out.cost += self.cost.migrate_page_ns + self.try_to_migrate_one(p, cpu, Some(&mut batch));
            unmapped.push((p, node));
            if self.call_clock.is_some() {
                unmap_at.push(self.call_instant(out, unmapped.len()));
            }
        }
        // try_to_unmap_flush
        self.flush_at = self.call_clock.map(|_| self.call_instant(out, unmapped.len()));
        out.cost += self.arch_tlbbatch_flush(&mut batch, cpu);
        self.flush_at = None;
        let n = unmapped.len();
        for (i, (p, node)) in unmapped.into_iter().enumerate() {
            self.migrate_folio_move(p, node, cpu, out);
            if self.call_clock.is_some() {
                let remap_at = self.call_instant(out, n - i - 1);
                self.note_call_migration(p, unmap_at[i], remap_at);
            }
        }
    }

    /// Where a timed call (mm/migration_entry.rs) is now, in absolute ns, with `pending` folios
    /// unmapped and not yet remapped: the cost charged so far, less the remap half of theirs.
    fn call_instant(&self, out: &MigrateOutcome, pending: usize) -> f64 {
        self.call_wall_clock(out.cost - pending as f64 * self.cost.migrate_page_ns / 2.0)
    }

    /// The node a folio's copy is allocated on: `target`, else (demotion, 6.1+) the first of
    /// `migrate_fallback` with room; None: -ENOMEM.
    // mm/vmscan.c: alloc_demote_folio (__GFP_THISNODE first, then the allowed mask);
    // mm/migrate.c: alloc_migration_target
    fn alloc_migration_target(&mut self, target: usize, cpu: usize, order: u8) -> Option<usize> {
        if self.alloc_pages_thisnode(target, cpu, order) {
            return Some(target);
        }
        for i in 0..self.migrate_fallback.len() {
            let node = self.migrate_fallback[i];
            if self.alloc_pages_fallback(target, node, cpu, order) {
                return Some(node);
            }
        }
        None
    }

    /// -ENOMEM for a large folio: a system call's migration (migrate_pages(2), move_pages(2))
    /// or reclaim's demotion (MR_DEMOTION) splits it, and its base pages are retried after the
    /// rest of the list; a NUMA hinting fault does not (`nosplit` for MR_NUMA_MISPLACED, the
    /// only other ASYNC caller). A split THP counts as a failed THP migration and as split.
    /// Returns whether it split.
    // mm/migrate.c: migrate_pages_batch (-ENOMEM) -> try_split_folio
    fn try_split_folio(&mut self, p: PageRef, mode: MigrateMode, cpu: usize, split: &mut Vec<PageRef>, out: &mut MigrateOutcome) -> bool {
        let (head, nr) = self.folio_of(p);
        if (mode == MigrateMode::Async && !self.migrating_for_demotion) || nr == 1 {
            return false;
        }
        if nr >= BLOCK_PAGES {
            self.count(VmEvent::ThpMigrationFail, 1);
            self.count(VmEvent::ThpMigrationSplit, 1);
            self.count(VmEvent::ThpSplitPage, 1);
            // __split_huge_pmd: secondary MMUs drop the huge mapping (MMU_NOTIFY_CLEAR)
            out.cost += self.mmu_notifier_clear(p.mm, p.vma, head, nr, cpu);
        }
        self.mms[p.mm].vmas[p.vma].pt.split_folio(head);
        out.cost += nr as f64 * self.cost.pte_update_ns;
        self.access_notify_folio_split(p.mm, p.vma, head, nr);
        split.extend((head..head + nr).map(|idx| PageRef { idx, ..p }));
        true
    }

    /// The folio of `p`: (head index, pages).
    pub fn folio_of(&self, p: PageRef) -> (u64, u64) {
        self.mms[p.mm].vmas[p.vma].pt.folio(p.idx)
    }

    fn folio_nr(&self, p: PageRef) -> u64 {
        self.folio_of(p).1
    }

    fn folio_order(&self, p: PageRef) -> u8 {
        self.folio_nr(p).trailing_zeros() as u8
    }

    /// Count a folio that did not move (pages; thp_migration_fail for a PMD-sized one).
    fn migrate_failed(&mut self, p: PageRef, out: &mut MigrateOutcome) {
        let nr = self.folio_nr(p);
        out.failed += nr;
        if nr >= BLOCK_PAGES {
            self.count(VmEvent::ThpMigrationFail, 1);
        }
    }

    /// A folio pinned for DMA has references migration cannot account for: the move fails
    /// (folio_migrate_mapping's refcount check, -EAGAIN until the retries run out).
    // mm/migrate.c: folio_migrate_mapping (expected_count)
    pub fn folio_extra_refs(&self, p: PageRef) -> bool {
        let (head, nr) = self.folio_of(p);
        self.folio_maybe_dma_pinned(p.mm, p.vma, head, nr)
    }

    /// Before v6.3: allocate, unmap (flushing at once), copy, remap, one folio at a time.
    // mm/migrate.c: unmap_and_move (<= v6.2)
    fn unmap_and_move(&mut self, p: PageRef, target: usize, cpu: usize, mode: MigrateMode, split: &mut Vec<PageRef>, out: &mut MigrateOutcome) {
        if self.folio_extra_refs(p) {
            out.cost += self.cost.migrate_page_ns;
            self.migrate_failed(p, out);
            return;
        }
        let Some(node) = self.alloc_migration_target(target, cpu, self.folio_order(p)) else {
            if !self.try_split_folio(p, mode, cpu, split, out) {
                self.migrate_failed(p, out);
            }
            return;
        };
        // a timed call unmaps (and flushes) halfway through the folio's work beyond the copy
        let unmap_at = self.call_clock.map(|_| self.call_wall_clock(out.cost + self.cost.migrate_page_ns / 2.0));
        self.flush_at = unmap_at;
        out.cost += self.cost.migrate_page_ns + self.try_to_migrate_one(p, cpu, None);
        self.flush_at = None;
        self.migrate_folio_move(p, node, cpu, out);
        if let Some(at) = unmap_at {
            self.note_call_migration(p, at, self.call_instant(out, 0));
        }
    }

    /// Copy the folio to its new node and install the new PTEs (or PMD) from the migration entries.
    // mm/migrate.c: migrate_folio_move -> remove_migration_ptes
    fn migrate_folio_move(&mut self, p: PageRef, target: usize, cpu: usize, out: &mut MigrateOutcome) {
        let (head, nr) = self.folio_of(p);
        let src = self.mms[p.mm].vmas[p.vma].pt.nid(head) as usize;
        out.cost += nr as f64 * self.page_copy_ns(self.topo.cpu_node[cpu], src, target);
        // a PROT_NONE PTE kept the write bit (savedwrite) from 4.0 until 6.3: a writable entry
        let writable_entry = self.feature(Feature::NumaPreserveWrite) && !self.feature(Feature::NumaDropSavedwrite);
        let writable_vma = self.mms[p.mm].vmas[p.vma].flags & VM_WRITE != 0;
        // before 6.1 remove_migration_pte builds a clean PTE (a THP's PMD is made dirty)
        let clean = self.variants().migration_dirty == MigrationDirty::Base && !self.mms[p.mm].vmas[p.vma].pt.pmd_mapped(head);
        if let Some(file) = self.page_object(p.mm, p.vma, head) {
            // a shmem folio (or a COW-shared one) is a base page, mapped by every process that
            // maps its file (or shares it since a fork)
            self.shmem_folio_moved(file, head, src, target);
            self.free_page(src);
        } else {
            for i in head..head + nr {
                let pt = &mut self.mms[p.mm].vmas[p.vma].pt;
                pt.set_node(i, target);
                if clean {
                    pt.set_dirty(i, false);
                }
                if pt.protnone(i) {
                    // since 6.3 the entry made from a PROT_NONE PTE is readable-exclusive, so the
                    // new PTE is read-only (a later write takes a write-protect fault)
                    pt.make_present(i, writable_entry && writable_vma);
                }
                self.access_notify_moved(p.mm, p.vma, i, src, target);
                self.free_page(src);
            }
            let m = &mut self.mms[p.mm];
            m.node_pages[src] -= nr;
            m.node_pages[target] += nr;
            self.reset_cpupid_across_tiers(p.mm, p.vma, head, src, target);
        }
        // the new folio joins the LRU through the migrating CPU's batch (migrate_folio_move)
        self.folio_add_lru(cpu, p.mm, p.vma, head, nr.trailing_zeros() as u8);
        out.succeeded += nr;
        self.events.migrations += 1;
        if nr >= BLOCK_PAGES {
            self.count(VmEvent::ThpMigrationSuccess, 1);
        }
        if nr > 1 {
            *self.folio_migrations.entry((p.mm, p.vma, head)).or_default() += 1;
        }
    }

    /// Checks before isolating the folio at `head` for a NUMA migration (under the PTL since
    /// v6.11): the 3.8-4.18 rate limit, free memory on the target, then folio_isolate_lru, which
    /// fails for a folio still in a CPU's LRU add batch (mm/swap.rs). A fault and its migration
    /// complete within the faulting task's step, so no other fault finds the folio isolated.
    // mm/migrate.c: migrate_misplaced_folio_prepare (numamigrate_isolate_page before 6.11)
    pub fn migrate_misplaced_folio_prepare(&mut self, mm: usize, vma: usize, head: u64, target: usize, nr: u64) -> bool {
        if self.feature(Feature::NumaMigrateRatelimit) && self.numamigrate_update_ratelimit(target, nr) {
            return false;
        }
        if !self.migrate_balanced_pgdat(target, nr) {
            // c574bbe91703 (5.18): a promotion that finds the fast node full wakes its kswapd
            if self.tiering_mode() {
                self.wakeup_kswapd(target);
            }
            return false;
        }
        self.folio_test_lru(mm, vma, head)
    }

    /// 3.8-4.18: at most ratelimit_pages (128 MiB) migrate to a node per 100 ms window; true
    /// when the node is over its limit and the migration must not happen.
    // mm/migrate.c: numamigrate_update_ratelimit (removed by efaffc5e40ae)
    fn numamigrate_update_ratelimit(&mut self, node: usize, nr: u64) -> bool {
        const RATELIMIT_PAGES: u64 = 128 << (20 - 12);
        const MIGRATE_INTERVAL_NS: u64 = 100_000_000;
        let now = self.now;
        let n = &mut self.nodes[node];
        if now > n.migrate_next_window {
            n.migrate_nr_pages = 0;
            n.migrate_next_window = now + MIGRATE_INTERVAL_NS;
        }
        if n.migrate_nr_pages > RATELIMIT_PAGES {
            return true;
        }
        n.migrate_nr_pages += nr;
        false
    }

    /// Migrate one faulting folio to `target`; returns (migrated, system time in ns).
    // mm/migrate.c: migrate_misplaced_folio -> migrate_pages(MIGRATE_ASYNC, MR_NUMA_MISPLACED)
    pub fn migrate_misplaced_folio(&mut self, t: usize, vma: usize, idx: u64, target: usize) -> (bool, f64) {
        let (mm, cpu) = (self.tasks[t].mm, self.tasks[t].cpu);
        let src = self.mms[mm].vmas[vma].pt.nid(idx) as usize;
        let out = self.migrate_pages(&[PageRef { mm, vma, idx }], target, cpu, MigrateMode::Async);
        if out.succeeded > 0 {
            self.count(VmEvent::NumaPagesMigrated, out.succeeded);
            // e39bb6be9f2b (5.18): a move from a lower tier into the top tier is a promotion
            if self.variants().numa_tiering >= crate::variants::NumaTiering::V5_18 && !self.node_is_toptier(src) && self.node_is_toptier(target) {
                self.count(VmEvent::PgpromoteSuccess, out.succeeded);
            }
        }
        (out.succeeded > 0, out.cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::small_kernel;

    fn pages_on_node0(k: &crate::kernel::Kernel, n: usize) -> Vec<PageRef> {
        (0..k.mms[0].vmas[0].pt.len()).filter(|&i| k.mms[0].vmas[0].pt.nid(i) == 0).take(n).map(|idx| PageRef { mm: 0, vma: 0, idx }).collect()
    }

    /// mm/migrate.c: migrate_pages (v6.3+) — batches of at most NR_MAX_BATCHED_MIGRATION (512)
    /// pages, one try_to_unmap_flush per batch; before v6.3 one flush per accessible page.
    #[test]
    fn batch_limit_gives_one_flush_per_512_pages() {
        for (batch, rounds) in [("true", 2), ("false", 1024)] {
            let mut k = small_kernel(&format!("[kernel.features]\nmigrate-batch-flush = {batch}"));
            let pages = pages_on_node0(&k, 1024);
            assert_eq!(pages.len(), 1024);
            let (n0, n1) = (k.nodes[0].used, k.nodes[1].used);
            let out = k.migrate_pages(&pages, 1, 0, MigrateMode::Sync);
            assert_eq!((out.succeeded, out.failed), (1024, 0));
            assert_eq!(k.vmstat.get(VmEvent::NrTlbRemoteFlush), rounds, "migrate-batch-flush = {batch}");
            assert_eq!(k.vmstat.get(VmEvent::PgmigrateSuccess), 1024);
            assert_eq!((k.nodes[0].used, k.nodes[1].used), (n0 - 1024, n1 + 1024), "pages conserved");
            assert!(pages.iter().all(|p| k.mms[0].vmas[0].pt.writable(p.idx)), "accessible PTEs stay writable");
        }
    }

    /// mm/migrate.c: migrate_pages_batch (-ENOMEM) -> try_split_folio — when the target has no
    /// free 2 MiB block, migrate_pages(2) splits a THP and moves its 512 base pages; a NUMA
    /// hinting fault (MR_NUMA_MISPLACED, `nosplit`) leaves it whole and fails.
    #[test]
    fn enomem_splits_a_thp_for_system_calls_only() {
        use crate::testutil::{small_kernel_from, SMALL};
        for batch in [true, false] {
            for mode in [MigrateMode::Sync, MigrateMode::Async] {
                let mut k = small_kernel_from(&format!("[kernel.thp]\nenabled = \"always\"\n[kernel.features]\nmigrate-batch-flush = {batch}\n{SMALL}"));
                let pt = &k.mms[0].vmas[0].pt;
                let head = (0..pt.len()).step_by(512).find(|&i| pt.nid(i) == 0 && pt.pmd_mapped(i)).expect("a THP on node 0");
                k.fragmentation = 1.0; // no free PMD-sized block anywhere
                let (n0, n1) = (k.nodes[0].used, k.nodes[1].used);
                let out = k.migrate_pages(&[PageRef { mm: 0, vma: 0, idx: head }], 1, 0, mode);
                let pt = &k.mms[0].vmas[0].pt;
                let (split, moved) = (mode == MigrateMode::Sync, if mode == MigrateMode::Sync { 512 } else { 0 });
                assert_eq!((out.succeeded, out.failed), (moved, 512 - moved), "batch {batch}, {mode:?}");
                assert_eq!(pt.pmd_mapped(head), !split);
                assert_eq!(pt.folio(head + 7), if split { (head + 7, 1) } else { (head, 512) });
                assert!((head..head + 512).all(|i| pt.nid(i) as u64 == moved / 512));
                assert_eq!(k.vmstat.get(VmEvent::ThpMigrationSplit), split as u64);
                assert_eq!(k.vmstat.get(VmEvent::ThpSplitPage), split as u64);
                assert_eq!(k.vmstat.get(VmEvent::ThpMigrationFail), 1, "a split THP counts as failed too");
                assert_eq!(k.vmstat.get(VmEvent::PgmigrateSuccess), moved);
                assert_eq!((k.nodes[0].used, k.nodes[1].used), (n0 - moved, n1 + moved), "pages conserved");
            }
        }
    }

    /// mm/migrate.c: migrate_pages_batch — a destination allocation failure (-ENOMEM) ends the
    /// unmap phase; what was unmapped still moves, the rest fails (pgmigrate_fail).
    #[test]
    fn target_out_of_memory_fails_the_rest() {
        let mut k = small_kernel("");
        let pages = pages_on_node0(&k, 100);
        k.nodes[1].used = k.nodes[1].present - k.nodes[1].wmark_min - 40;
        let out = k.migrate_pages(&pages, 1, 0, MigrateMode::Sync);
        assert_eq!((out.succeeded, out.failed), (40, 60));
        assert_eq!(k.vmstat.get(VmEvent::PgmigrateFail), 60);
    }

    /// mm/migrate.c: remove_migration_pte — before 6.1 (2e3468778dbe) the PTE rebuilt after a
    /// migration is clean, so until the next store 4.0-rc4's pte_dirty test takes a hint fault
    /// on it as TNF_NO_GROUP (the unpredictability that made seed 003 group by VMA flags); from
    /// 6.1 the migration entry keeps the dirty bit.
    #[test]
    fn migrated_pte_is_clean_before_6_1() {
        for (version, dirty) in [("4.0-rc4", false), ("5.12", false), ("6.1", true), ("6.12", true)] {
            let mut k = small_kernel(&format!("[kernel]\nversion = \"{version}\""));
            let p = pages_on_node0(&k, 1)[0];
            assert!(k.mms[0].vmas[0].pt.dirty(p.idx), "first touch by a store: dirty");
            k.migrate_pages(&[p], 1, 0, MigrateMode::Sync);
            let pt = &k.mms[0].vmas[0].pt;
            assert_eq!((pt.nid(p.idx), pt.dirty(p.idx)), (1, dirty), "{version}");
            k.mms[0].vmas[0].pt.make_protnone(p.idx);
            let writable = k.mms[0].vmas[0].flags & crate::mm::types::VM_WRITE != 0;
            assert_eq!(k.numa_no_group(0, 0, p.idx, writable), version == "4.0-rc4" && !dirty, "{version}");
        }
    }

    /// mm/migrate.c: migrate_pages_batch — `nosplit` holds only for MR_NUMA_MISPLACED: reclaim's
    /// demotion (MR_DEMOTION, async too) splits a THP its target has no 2 MiB of room for and
    /// demotes the base pages that fit.
    #[test]
    fn demotion_splits_a_thp_its_target_has_no_room_for() {
        use crate::mm::pgtable::{PTE_DIRTY, PTE_WRITE};
        use crate::mm::types::{VM_READ, VM_WRITE};
        use crate::mm::vmscan::Reclaimer;
        let mut k = crate::testutil::tiered_kernel("demotion_enabled = true", 2);
        let mm = k.tasks.iter().find(|t| t.comm == "memhog").expect("the memhog").mm;
        let vma = k.mms[mm].mmap_anon(512, VM_READ | VM_WRITE);
        k.mms[mm].vmas[vma].pt.populate_folio(0, 9, 0, PTE_WRITE | PTE_DIRTY, true);
        k.nodes[0].used += 512;
        k.mms[mm].node_pages[0] += 512;
        // node 1: room for 300 base pages above its min watermark, not for a 2 MiB folio
        k.nodes[1].used = k.nodes[1].present - k.nodes[1].wmark_min - 300;
        let mut cpu_ns = 0.0;
        let moved = k.demote_folio_list(&[PageRef { mm, vma, idx: 0 }], 0, Reclaimer::Kswapd, &mut cpu_ns);
        assert_eq!(moved, 300, "the pages that fit");
        assert_eq!(k.vmstat.get(VmEvent::ThpMigrationSplit), 1);
        assert!(!k.migrating_for_demotion, "cleared after the call");
    }
}

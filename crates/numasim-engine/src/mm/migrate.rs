//! Page migration (mm/migrate.c): `migrate_pages()` one folio at a time (<= v6.2) or in batches
//! of up to 512 pages with one TLB flush per batch (`migrate-batch-flush`, v6.3), and the
//! NUMA-fault entry points.

use crate::arch::x86::tlb::TlbBatch;
use crate::features::Feature;
use crate::kernel::Kernel;
use crate::mm::rmap::PageRef;
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
        if self.feature(Feature::MigrateBatchFlush) {
            // migrate_pages_sync first tries the batch in ASYNC mode and retries failures one
            // by one, except -ENOMEM, the only failure modelled here: so both modes batch
            let _ = mode;
            for chunk in pages.chunks(NR_MAX_BATCHED_MIGRATION) {
                self.migrate_pages_batch(chunk, target, cpu, &mut out);
            }
        } else {
            for &p in pages {
                self.unmap_and_move(p, target, cpu, &mut out);
            }
        }
        self.count(VmEvent::PgmigrateSuccess, out.succeeded);
        self.count(VmEvent::PgmigrateFail, out.failed);
        out
    }

    /// Unmap every page (deferring flushes), one flush, then copy and remap every page.
    // mm/migrate.c: migrate_pages_batch
    fn migrate_pages_batch(&mut self, chunk: &[PageRef], target: usize, cpu: usize, out: &mut MigrateOutcome) {
        let mut batch = TlbBatch::default();
        let mut unmapped = Vec::with_capacity(chunk.len());
        for (i, &p) in chunk.iter().enumerate() {
            if self.folio_extra_refs(p) {
                out.cost += self.cost.migrate_page_ns;
                out.failed += 1;
                continue;
            }
            if !self.alloc_page_thisnode(target, cpu) {
                // -ENOMEM: stop the unmap phase, move what is unmapped
                out.failed += (chunk.len() - i) as u64;
                break;
            }
            out.cost += self.cost.migrate_page_ns + self.try_to_migrate_one(p, cpu, Some(&mut batch));
            unmapped.push(p);
        }
        // try_to_unmap_flush
        out.cost += self.arch_tlbbatch_flush(&mut batch, cpu);
        for p in unmapped {
            self.migrate_folio_move(p, target, cpu, out);
        }
    }

    /// Before v6.3: allocate, unmap (flushing at once), copy, remap, one page at a time.
    /// A page pinned for DMA has references migration cannot account for: the move fails
    /// (folio_migrate_mapping's refcount check, -EAGAIN until the retries run out).
    // mm/migrate.c: folio_migrate_mapping (expected_count)
    pub fn folio_extra_refs(&self, p: PageRef) -> bool {
        self.mms[p.mm].io_pins.iter().any(|&(_, vma, first, n)| vma == p.vma && (first..first + n).contains(&p.idx))
    }

    // mm/migrate.c: unmap_and_move (<= v6.2)
    fn unmap_and_move(&mut self, p: PageRef, target: usize, cpu: usize, out: &mut MigrateOutcome) {
        if self.folio_extra_refs(p) {
            out.cost += self.cost.migrate_page_ns;
            out.failed += 1;
            return;
        }
        if !self.alloc_page_thisnode(target, cpu) {
            out.failed += 1;
            return;
        }
        out.cost += self.cost.migrate_page_ns + self.try_to_migrate_one(p, cpu, None);
        self.migrate_folio_move(p, target, cpu, out);
    }

    /// Copy the page to its new node and install the new PTE from the migration entry.
    // mm/migrate.c: migrate_folio_move -> remove_migration_ptes
    fn migrate_folio_move(&mut self, p: PageRef, target: usize, cpu: usize, out: &mut MigrateOutcome) {
        let pt = &mut self.mms[p.mm].vmas[p.vma].pt;
        let src = pt.node[p.idx as usize] as usize;
        out.cost += self.cost.page_copy_ns(self.topo.cpu_node[cpu], src, target);
        pt.set_node(p.idx, target);
        if pt.protnone(p.idx) {
            // the entry was made from a PROT_NONE PTE: readable-exclusive, so the new PTE is
            // present and read-only (a later write takes a write-protect fault)
            pt.make_present(p.idx, false);
        }
        let m = &mut self.mms[p.mm];
        m.node_pages[src] -= 1;
        m.node_pages[target] += 1;
        self.sampler_moved(p.mm, p.vma, p.idx, src, target);
        self.free_page(src);
        out.succeeded += 1;
        self.events.migrations += 1;
    }

    /// Checks before isolating a folio for a NUMA migration (called under the PTL in v6.11+).
    // mm/migrate.c: migrate_misplaced_folio_prepare
    pub fn migrate_misplaced_folio_prepare(&mut self, target: usize, nr: u64) -> bool {
        // The folio is always on the LRU here: a fault and its migration complete within the
        // faulting task's step, so no other fault can find it isolated.
        if self.feature(Feature::NumaMigrateRatelimit) && self.numamigrate_update_ratelimit(target, nr) {
            return false;
        }
        self.migrate_balanced_pgdat(target, nr)
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

    /// Migrate one faulting page to `target`; returns (migrated, system time in ns).
    // mm/migrate.c: migrate_misplaced_folio -> migrate_pages(MIGRATE_ASYNC, MR_NUMA_MISPLACED)
    pub fn migrate_misplaced_folio(&mut self, t: usize, vma: usize, idx: u64, target: usize) -> (bool, f64) {
        let (mm, cpu) = (self.tasks[t].mm, self.tasks[t].cpu);
        let out = self.migrate_pages(&[PageRef { mm, vma, idx }], target, cpu, MigrateMode::Async);
        if out.succeeded > 0 {
            self.count(VmEvent::NumaPagesMigrated, out.succeeded);
        }
        (out.succeeded > 0, out.cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::small_kernel;

    fn pages_on_node0(k: &crate::kernel::Kernel, n: usize) -> Vec<PageRef> {
        (0..k.mms[0].vmas[0].pt.len()).filter(|&i| k.mms[0].vmas[0].pt.node[i as usize] == 0).take(n).map(|idx| PageRef { mm: 0, vma: 0, idx }).collect()
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
}

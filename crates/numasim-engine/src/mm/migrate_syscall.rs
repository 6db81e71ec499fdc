//! The migration system calls: migrate_pages(2) moves every page of a process on some nodes,
//! move_pages(2) a range of its pages, through migrate_pages() in batches, across ticks.

use crate::features::Feature;
use crate::kernel::Kernel;
use crate::mm::migrate::{MigrateMode, NR_MAX_BATCHED_MIGRATION};
use crate::mm::migration_entry::CallClock;
use crate::mm::pgtable::NO_NODE;
use crate::mm::rmap::PageRef;

/// Which pages a migration system call moves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PageSelection {
    /// migrate_pages(2): every page on this node
    Node(usize),
    /// move_pages(2): the pages of a range of one VMA
    Range { vma: usize, first: u64, npages: u64 },
}

impl PageSelection {
    fn matches_node(&self, node: usize) -> bool {
        match *self {
            PageSelection::Node(n) => n == node,
            PageSelection::Range { .. } => true,
        }
    }

    /// Page index range of VMA `vma` (of `len` pages) to look at.
    fn range(&self, vma: usize, len: u64) -> (u64, u64) {
        match *self {
            PageSelection::Node(_) => (0, len),
            PageSelection::Range { vma: v, first, npages } if v == vma => (first.min(len), (first + npages).min(len)),
            PageSelection::Range { .. } => (0, 0),
        }
    }
}

impl Kernel {
    /// migrate_pages(2) or move_pages(2) by task `t` of the process whose mm is `target` (None:
    /// no such process): the selected pages move to `to`, resumable across ticks; returns true
    /// when the call is complete.
    // mm/mempolicy.c: kernel_migrate_pages -> migrate_to_node; mm/migrate.c: do_pages_move
    pub fn sys_migrate(&mut self, t: usize, target: Option<usize>, sel: PageSelection, to: usize, b: &mut f64) -> bool {
        let Some(mm) = target.filter(|&mm| !self.mms[mm].exited && self.mms[mm].users > 0) else {
            self.tasks[t].syscall = None;
            return true; // -ESRCH
        };
        // migrate_pages(2) by root (numactl's migratepages, numaw) is MPOL_MF_MOVE_ALL
        // (capable(CAP_SYS_NICE)): shared folios move too; move_pages(2) with MPOL_MF_MOVE
        // leaves a folio that another process maps (-EACCES)
        let move_all = matches!(sel, PageSelection::Node(_));
        let wanted = |k: &Kernel, p: &PageRef| {
            let node = k.mms[p.mm].vmas[p.vma].pt.nid(p.idx);
            node != NO_NODE && node as usize != to && sel.matches_node(node as usize) && (move_all || !k.folio_likely_mapped_shared(p.mm, p.vma, p.idx))
        };
        if self.tasks[t].syscall.is_none() {
            // lru_cache_disable: every CPU's LRU add batch is drained, and stays off for the call
            self.lru_add_drain_all();
            // queue_pages_range / add_folio_for_migration: isolate the selected folios, each once
            let mut pages = Vec::new();
            for (vma, v) in self.mms[mm].vmas.iter().enumerate() {
                let (lo, hi) = sel.range(vma, v.pt.len());
                let mut idx = lo;
                while idx < hi {
                    let (head, nr) = if v.pt.populated(idx) { v.pt.folio(idx) } else { (idx, 1) };
                    let p = PageRef { mm, vma, idx: head.max(lo) };
                    if wanted(self, &p) {
                        pages.push(p);
                    }
                    idx = head + nr;
                }
            }
            let walk = pages.len() as f64 * self.cost.pte_update_ns;
            self.tasks[t].syscall = Some((pages, 0));
            self.charge_sys(t, walk, b);
        }
        let cpu = self.tasks[t].cpu;
        while *b > 0.0 {
            let (pages, done) = self.tasks[t].syscall.take().expect("call in progress");
            if done >= pages.len() {
                return true;
            }
            let end = (done + NR_MAX_BATCHED_MIGRATION).min(pages.len());
            // pages isolated by the call stay where they were queued
            let chunk: Vec<_> = pages[done..end].iter().copied().filter(|p| wanted(self, p)).collect();
            self.tasks[t].syscall = Some((pages, end));
            if self.timed_migrators.contains(&t) {
                self.call_clock = Some(CallClock { caller: t, at: self.now as f64 + (self.tick_ns as f64 - *b), left: *b });
            }
            let out = self.migrate_pages(&chunk, to, cpu, MigrateMode::Sync);
            self.call_clock = None;
            self.lru_add_drain(cpu); // LRU caching is disabled during the call
            self.charge_sys(t, out.cost, b);
            let batched = self.feature(Feature::MigrateBatchFlush);
            self.migration_entry_stalls(&chunk, out.cost, batched);
        }
        let finished = self.tasks[t].syscall.as_ref().is_some_and(|(p, d)| *d >= p.len());
        if finished {
            self.tasks[t].syscall = None;
        }
        finished
    }
}

#[cfg(test)]
mod tests {
    use super::PageSelection;
    use crate::mm::shmem::tests::{two_processes, Two};

    /// mm/migrate.c: add_folio_for_migration — move_pages(2) with MPOL_MF_MOVE skips a folio
    /// mapped by another process (-EACCES); mm/mempolicy.c: kernel_migrate_pages — root's
    /// migrate_pages(2) is MPOL_MF_MOVE_ALL and moves it, in every mapping (the rmap walk).
    #[test]
    fn shared_folios_move_only_with_move_all() {
        for move_all in [false, true] {
            let Two { mut k, a, mm_b, b, file, va, vb } = two_processes();
            k.shmem_fault(a, va, file, 3).unwrap();
            k.shmem_fault(b, vb, file, 3).unwrap();
            k.shmem_fault(a, va, file, 4).unwrap();
            let sel = if move_all { PageSelection::Node(0) } else { PageSelection::Range { vma: va, first: 0, npages: 64 } };
            let mut budget = 1e9;
            assert!(k.sys_migrate(a, Some(0), sel, 1, &mut budget));
            let node = |m: usize, v: usize, i: u64| k.mms[m].vmas[v].pt.nid(i);
            assert_eq!(node(0, va, 4), 1, "a page only this process maps moves");
            let want = if move_all { 1 } else { 0 };
            assert_eq!((node(0, va, 3), node(mm_b, vb, 3)), (want, want), "the shared page, in both mappings");
            crate::invariants::check_counters(&k).unwrap();
        }
    }
}

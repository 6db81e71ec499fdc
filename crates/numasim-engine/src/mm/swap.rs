//! The per-CPU LRU add batches (mm/swap.c: folio_add_lru, folio_batch_move_lru, lru_add_drain):
//! a new or migrated base folio waits in its CPU's batch, off the LRU and holding a reference,
//! until the batch fills or is drained. Meanwhile folio_isolate_lru fails (a NUMA migration of
//! it is refused: TNF_MIGRATE_FAIL) and, up to 6.9, the scanner passes it by in a COW mapping
//! (page_count != 1). A batch holds a few pages per CPU, but a CPU that stops allocating keeps
//! its last ones there indefinitely.

use crate::kernel::Kernel;
use crate::mm::rmap::PageRef;
use crate::variants::LruAddBatch;

impl Kernel {
    /// Folios a CPU's batch holds before it moves them all to the LRU.
    // include/linux/pagevec.h: PAGEVEC_SIZE
    fn lru_batch_size(&self) -> usize {
        match self.variants().lru_add_batch {
            LruAddBatch::Base => 14,
            LruAddBatch::V4_16 => 15,
            LruAddBatch::V6_10 => 31,
        }
    }

    /// A folio of 2^`order` pages at `head` joins the LRU through `cpu`'s batch; a large folio
    /// (or a full batch) moves the batch to the LRU at once.
    // mm/swap.c: folio_add_lru
    pub fn folio_add_lru(&mut self, cpu: usize, mm: usize, vma: usize, head: u64, order: u8) {
        if order > 0 {
            self.lru_add_drain(cpu);
            if self.lru_tracking {
                self.lru_add_tail(PageRef { mm, vma, idx: head });
            }
            return;
        }
        // a shared folio is found through its object, whichever mapping added it
        let at = match self.page_object(mm, vma, head) {
            Some(file) => {
                self.shmem[file].cache.set_lru_batched(head, true);
                PageRef::in_object(file, head)
            }
            None => {
                self.mms[mm].vmas[vma].pt.set_lru_batched(head, true);
                PageRef { mm, vma, idx: head }
            }
        };
        self.lru_add[cpu].push(at);
        if self.lru_add[cpu].len() >= self.lru_batch_size() {
            self.lru_add_drain(cpu);
        }
    }

    /// Move `cpu`'s batch to the LRU.
    // mm/swap.c: lru_add_drain (folio_batch_move_lru)
    pub fn lru_add_drain(&mut self, cpu: usize) {
        for p in std::mem::take(&mut self.lru_add[cpu]) {
            if let Some(file) = p.object() {
                if self.shmem[file].cache.populated(p.idx) {
                    self.shmem[file].cache.set_lru_batched(p.idx, false);
                }
                continue;
            }
            if let Some(v) = self.mms.get_mut(p.mm).filter(|m| !m.exited).and_then(|m| m.vmas.get_mut(p.vma)) {
                if p.idx < v.pt.len() {
                    v.pt.set_lru_batched(p.idx, false);
                    if self.lru_tracking {
                        self.lru_add_tail(p);
                    }
                }
            }
        }
    }

    /// Every CPU's batch (migrate_pages(2) and move_pages(2) start with it).
    // mm/swap.c: lru_add_drain_all (lru_cache_disable)
    pub fn lru_add_drain_all(&mut self) {
        for cpu in 0..self.lru_add.len() {
            self.lru_add_drain(cpu);
        }
    }

    /// Whether the folio holding page `idx` is on the LRU (isolatable).
    // include/linux/page-flags.h: folio_test_lru
    pub fn folio_test_lru(&self, mm: usize, vma: usize, idx: u64) -> bool {
        let pt = self.page_object(mm, vma, idx).map_or(&self.mms[mm].vmas[vma].pt, |file| &self.shmem[file].cache);
        !pt.lru_batched(pt.folio(idx).0)
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{small_kernel, thread};

    /// mm/swap.c: folio_add_lru — base folios wait in their CPU's batch until it holds
    /// PAGEVEC_SIZE (15 in 4.16-6.9, 31 from 6.10); then all join the LRU together.
    #[test]
    fn batch_fills_then_moves_to_the_lru() {
        for (version, size) in [("6.1", 15u64), ("6.12", 31)] {
            let mut k = small_kernel(&format!("[kernel]\nversion = \"{version}\""));
            k.lru_add_drain_all();
            let t = thread(&k, 0);
            let cpu = k.tasks[t].cpu;
            for i in 0..size - 1 {
                k.folio_add_lru(cpu, 0, 0, i, 0);
            }
            assert!((0..size - 1).all(|i| !k.folio_test_lru(0, 0, i)), "{version}: still batched");
            k.folio_add_lru(cpu, 0, 0, size - 1, 0);
            assert!((0..size).all(|i| k.folio_test_lru(0, 0, i)), "{version}: drained when full");
            k.folio_add_lru(cpu, 0, 0, 100, 0);
            k.folio_add_lru(cpu, 0, 0, 512, 9);
            assert!(k.folio_test_lru(0, 0, 100), "a large folio drains the batch");
        }
    }
}

//! Access notifiers: the model of a process's accesses (workload/random/) hears of the
//! page-table changes that decide what its accesses cost and which of them fault, and answers
//! what its threads do to a page meanwhile, as a secondary MMU does through its MMU notifier
//! (include/linux/mmu_notifier.h: struct mmu_notifier_ops, clear_young / test_young for the
//! questions). The operations are a trait the model implements on `Kernel`: mm names no
//! workload code, and every call is static (first touch, migration and scan windows are hot).

use crate::kernel::Kernel;
use crate::mm::rmap::PageRef;

/// The access model's operations. A subscription is a process's `Mm::sampler`.
pub trait AccessNotifier {
    /// The subscription of (mm, vma) whose accesses fault on the host PTEs, if any (a guest's
    /// fault on its SPTEs: kvm/mmu.rs). Looked up once for many ranges.
    fn access_subscription(&self, mm: usize, vma: usize) -> Option<usize>;

    /// Page `idx` of (mm, vma) was populated on `node`.
    fn access_notify_populated(&mut self, mm: usize, vma: usize, idx: u64, node: usize);

    /// Page `idx` of (mm, vma) moved from node `from` to `to`.
    fn access_notify_moved(&mut self, mm: usize, vma: usize, idx: u64, from: usize, to: usize);

    /// The next access (the next store, if `write_only`) to any page of [first, first + n) of
    /// subscription `sub`'s VMA needs a fault, which handles them all.
    fn access_notify_invalidate(&mut self, sub: usize, first: u64, n: u64, write_only: bool);

    /// Does another thread of task `t`'s process touch page `idx` of `vma` within `window_ns`?
    /// That thread.
    fn access_concurrent_fault(&mut self, t: usize, vma: usize, idx: u64, window_ns: f64) -> Option<usize>;

    /// The expected wait of a thread on `node` of the process of `pages` (one VMA's) that meets
    /// their migration entries, each unmapped for `window` ns (all at once, if `batched`);
    /// None if its accesses are not modelled.
    fn access_migration_entry_wait_ns(&self, pages: &[PageRef], node: usize, window: f64, batched: bool) -> Option<f64>;
}

impl Kernel {
    /// The folio at [head, head + nr) was split: its pages that need a fault on their next
    /// access (PROT_NONE) or store (read-only), so far one event for the folio, get one each (a
    /// redraw: geometric waits are memoryless).
    pub fn access_notify_folio_split(&mut self, mm: usize, vma: usize, head: u64, nr: u64) {
        let Some(s) = self.access_subscription(mm, vma) else { return };
        for i in head..head + nr {
            let pt = &self.mms[mm].vmas[vma].pt;
            let write_only = match (pt.protnone(i), pt.populated(i) && !pt.writable(i)) {
                (true, _) => false,
                (false, true) => true,
                (false, false) => continue,
            };
            self.access_notify_invalidate(s, i, 1, write_only);
        }
    }
}

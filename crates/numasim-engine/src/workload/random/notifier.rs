//! The access model's side of mm/access_notifier.rs: page-table changes reach the sampler of
//! the VMA as probability mass and fault events.

use super::sampler::AccessSampler;
use crate::kernel::Kernel;
use crate::mm::access_notifier::AccessNotifier;
use crate::mm::pgtable::PageEntry;
use crate::mm::rmap::PageRef;

impl Kernel {
    pub(super) fn sampler_of(&self, mm: usize, vma: usize) -> Option<usize> {
        self.mms[mm].sampler.filter(|&s| self.samplers[s].vma == vma)
    }

    /// Sampler `s` and the page entries of its VMA, which hold its events' generations
    /// (none once its process has exited).
    fn sampler_pages(&mut self, s: usize) -> (&mut AccessSampler, &mut [PageEntry]) {
        let smp = &mut self.samplers[s];
        let pages = self.mms[smp.mm].vmas.get_mut(smp.vma).map_or(&mut [][..], |v| &mut v.pt.pages[..]);
        (smp, pages)
    }

    /// The sampler of (mm, vma) whose pages take fault events (a guest's take EPT violations,
    /// which kvm/mmu.rs notifies).
    pub fn fault_sampler(&self, mm: usize, vma: usize) -> Option<usize> {
        self.sampler_of(mm, vma).filter(|&s| self.samplers[s].kvm.is_none())
    }

    /// The page's next access (or next write) needs a fault: draw when it comes.
    pub fn sampler_needs_fault(&mut self, mm: usize, vma: usize, idx: u64, write_only: bool) {
        if let Some(s) = self.fault_sampler(mm, vma) {
            self.sampler_schedule(s, idx, 1, write_only);
        }
    }

    /// The next access to any page of [first, first + n) (one folio's protected pages) needs a
    /// fault, which handles them all: one event at the first of them, drawn with their summed
    /// probability.
    pub fn sampler_needs_fault_range(&mut self, mm: usize, vma: usize, first: u64, n: u64, write_only: bool) {
        if let Some(s) = self.fault_sampler(mm, vma) {
            self.sampler_schedule(s, first, n, write_only);
        }
    }

    /// `sampler_needs_fault_range` on sampler `s` (from `fault_sampler`, looked up once for
    /// many ranges), and a guest's refault.
    pub fn sampler_schedule(&mut self, s: usize, first: u64, n: u64, write_only: bool) {
        let (smp, pages) = self.sampler_pages(s);
        let lo = (first as usize).min(smp.weight.len());
        let hi = ((first + n) as usize).min(smp.weight.len());
        if n == 1 && lo < hi {
            smp.schedule(pages, first, write_only);
        } else if lo < hi {
            let p: f64 = smp.weight[lo..hi].iter().sum();
            smp.schedule_with(pages, first, p, write_only);
        }
    }
}

impl AccessNotifier for Kernel {
    fn access_subscription(&self, mm: usize, vma: usize) -> Option<usize> {
        self.fault_sampler(mm, vma)
    }

    fn access_notify_populated(&mut self, mm: usize, vma: usize, idx: u64, node: usize) {
        if let Some(s) = self.sampler_of(mm, vma) {
            let s = &mut self.samplers[s];
            let w = s.weight.get(idx as usize).copied().unwrap_or(0.0);
            s.add_mass(node, w);
        }
    }

    fn access_notify_moved(&mut self, mm: usize, vma: usize, idx: u64, from: usize, to: usize) {
        if let Some(s) = self.sampler_of(mm, vma) {
            let s = &mut self.samplers[s];
            let w = s.weight.get(idx as usize).copied().unwrap_or(0.0);
            s.add_mass(from, -w);
            s.add_mass(to, w);
        }
    }

    fn access_notify_invalidate(&mut self, sub: usize, first: u64, n: u64, write_only: bool) {
        self.sampler_schedule(sub, first, n, write_only);
    }

    fn access_concurrent_fault(&mut self, t: usize, vma: usize, idx: u64, window_ns: f64) -> Option<usize> {
        self.concurrent_fault_race(t, vma, idx, window_ns)
    }

    fn access_migration_entry_wait_ns(&self, pages: &[PageRef], node: usize, window: f64, batched: bool) -> Option<f64> {
        self.migration_entry_wait_ns(pages, node, window, batched)
    }
}

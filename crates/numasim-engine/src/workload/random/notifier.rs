//! The kernel-side hooks of the access model: mm tells the sampler of a VMA of the page-table
//! changes that decide its probability mass and fault events.

use super::sampler::AccessSampler;
use crate::kernel::Kernel;
use crate::mm::pgtable::PageEntry;

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

    /// A page of a sampled VMA was populated on `node`.
    pub fn sampler_populated(&mut self, mm: usize, vma: usize, idx: u64, node: usize) {
        if let Some(s) = self.sampler_of(mm, vma) {
            let s = &mut self.samplers[s];
            let w = s.weight.get(idx as usize).copied().unwrap_or(0.0);
            s.add_mass(node, w);
        }
    }

    /// A page of a sampled VMA moved between nodes.
    pub fn sampler_moved(&mut self, mm: usize, vma: usize, idx: u64, from: usize, to: usize) {
        if let Some(s) = self.sampler_of(mm, vma) {
            let s = &mut self.samplers[s];
            let w = s.weight.get(idx as usize).copied().unwrap_or(0.0);
            s.add_mass(from, -w);
            s.add_mass(to, w);
        }
    }

    /// The sampler of (mm, vma) whose pages take fault events (a guest's take EPT violations,
    /// scheduled by `sampler_refault`).
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

    /// The folio at [head, head + nr) was split: its pages that need a fault on their next
    /// access (PROT_NONE) or store (read-only), so far one event for the folio, get one each
    /// (a redraw: geometric waits are memoryless).
    pub fn sampler_folio_split(&mut self, mm: usize, vma: usize, head: u64, nr: u64) {
        let Some(s) = self.fault_sampler(mm, vma) else { return };
        for i in head..head + nr {
            let pt = &self.mms[mm].vmas[vma].pt;
            let write_only = match (pt.protnone(i), pt.populated(i) && !pt.writable(i)) {
                (true, _) => false,
                (false, true) => true,
                (false, false) => continue,
            };
            self.sampler_schedule(s, i, 1, write_only);
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

    /// A guest's SPTEs of [first, first + n) were zapped: the next access to any of them takes an
    /// EPT violation (one event for a huge SPTE).
    pub fn sampler_refault(&mut self, s: usize, first: u64, n: u64) {
        self.sampler_schedule(s, first, n, false);
    }
}

//! Pinned user pages (mm/gup.c): pins for direct I/O, dropped when the I/O completes, and
//! long-term pins (FOLL_LONGTERM, e.g. VFIO), held until exit. Migration and, depending on the
//! kernel, NUMA balancing leave a pinned folio where it is.

use crate::kernel::Kernel;

impl Kernel {
    /// Task `t` pins pages [first, first + npages) of `vma` for direct I/O.
    // mm/gup.c: pin_user_pages (FOLL_PIN)
    pub fn pin_user_pages(&mut self, t: usize, vma: usize, first: u64, npages: u64) {
        let mm = self.tasks[t].mm;
        self.mms[mm].io_pins.push((t, vma, first, npages));
    }

    /// The I/O task `t` waited for has completed: its pages are unpinned.
    // mm/gup.c: unpin_user_pages
    pub fn unpin_user_pages(&mut self, t: usize) {
        let mm = self.tasks[t].mm;
        if !self.mms[mm].io_pins.is_empty() {
            self.mms[mm].io_pins.retain(|pin| pin.0 != t);
        }
    }

    /// Task `t` pins pages [first, first + npages) of `vma` long-term, until exit.
    // mm/gup.c: pin_user_pages (FOLL_LONGTERM)
    pub fn pin_user_pages_longterm(&mut self, t: usize, vma: usize, first: u64, npages: u64) {
        let mm = self.tasks[t].mm;
        self.mms[mm].longterm_pins.push((vma, first, npages));
    }

    /// Some page of the folio at [head, head + nr) is pinned (for direct I/O or long-term).
    // include/linux/mm.h: folio_maybe_dma_pinned
    pub fn folio_maybe_dma_pinned(&self, mm: usize, vma: usize, head: u64, nr: u64) -> bool {
        let m = &self.mms[mm];
        m.io_pins.iter().any(|&(_, v, first, n)| v == vma && first < head + nr && head < first + n) || m.longterm_pins.iter().any(|&(v, first, n)| v == vma && first < head + nr && head < first + n)
    }
}

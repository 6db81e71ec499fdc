//! change_protection for NUMA hinting (mm/mprotect.c, spec §1.7).

use crate::kernel::Kernel;
use crate::mm::pgtable::BLOCK_PAGES;
use crate::mm::types::VM_SHARED;

impl Kernel {
    /// Make the resident, accessible PTEs of [start, end) (VMA page indices) PROT_NONE.
    /// Returns the number of PTEs changed and the number of page-table blocks walked.
    // mm/mprotect.c: change_protection -> change_pte_range (MM_CP_PROT_NUMA)
    pub fn change_protection_prot_numa(&mut self, t: usize, vma: usize, start: u64, end: u64) -> (u64, u64) {
        let mm = self.tasks[t].mm;
        // private VMA of a single-threaded process: pages already on this node are skipped
        let single = self.mms[mm].vmas[vma].flags & VM_SHARED == 0 && self.mms[mm].users == 1;
        let target = single.then(|| self.task_node(t) as u8);
        let sampled = self.mms[mm].sampler.is_some();
        let mut protected = Vec::new();
        let pt = &mut self.mms[mm].vmas[vma].pt;
        let (mut changed, mut walked) = (0, 0);
        let mut i = start;
        while i < end {
            let b = (i / BLOCK_PAGES) as usize;
            let bend = ((b as u64 + 1) * BLOCK_PAGES).min(end);
            walked += 1;
            let k = pt.blocks[b];
            if k.populated == 0 || k.protnone == k.populated {
                i = bend;
                continue;
            }
            for p in i..bend {
                // skip: not present, already PROT_NONE ("avoid TLB flush"), or on the target node
                if !pt.populated(p) || pt.protnone(p) || Some(pt.node[p as usize]) == target {
                    continue;
                }
                pt.make_protnone(p);
                changed += 1;
                if sampled {
                    protected.push(p);
                }
            }
            i = bend;
        }
        for p in protected {
            self.sampler_needs_fault(mm, vma, p, false);
        }
        (changed, walked)
    }
}

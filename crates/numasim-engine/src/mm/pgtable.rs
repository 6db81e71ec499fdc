//! Per-page state in compact arrays (one entry per 4 KiB page of a VMA), plus per-2 MiB block
//! summaries so that an access stream can cross a block whose pages need no fault in O(nodes).
//!
//! Per page: node (u8), PTE flags (u8), folio order (u8), last_cpupid (u32): 7 bytes. A folio
//! of order o covers the 2^o pages from its naturally aligned head; its pages share node and
//! flags, changed together by the folio operations. A PMD-mapped THP is an order-9 folio whose
//! block has `pmd` set.

use crate::topology::MAX_NODES;

pub const NO_NODE: u8 = 0xff;
/// PTE is a NUMA hinting PROT_NONE entry (pte_protnone).
pub const PTE_PROTNONE: u8 = 1 << 0;
/// PTE is writable (pte_write).
pub const PTE_WRITE: u8 = 1 << 1;
/// Page has been written (pte_dirty).
pub const PTE_DIRTY: u8 = 1 << 2;
/// `last_cpupid` of a page that no hint fault has stamped (include/linux/mm.h: all ones).
pub const CPUPID_UNSET: u32 = u32::MAX;
/// Pages per PMD (HPAGE_PMD_NR): the block size of the summaries.
pub const BLOCK_PAGES: u64 = 512;

/// Summary of one 2 MiB block: populated pages per node, and how many need a fault.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Block {
    pub node: [u16; MAX_NODES],
    pub populated: u16,
    pub protnone: u16,
    /// Populated, present (not PROT_NONE) and not writable: a write takes a write fault.
    pub nowrite: u16,
    /// The block is one PMD-mapped THP (pmd_trans_huge).
    pub pmd: bool,
}

#[derive(Debug, Clone)]
pub struct PageTable {
    pub node: Vec<u8>,
    pub flags: Vec<u8>,
    /// Order of the folio holding each page (0 when unpopulated).
    pub order: Vec<u8>,
    pub cpupid: Vec<u32>,
    pub blocks: Vec<Block>,
}

impl PageTable {
    pub fn new(npages: u64) -> Self {
        let n = npages as usize;
        let nb = npages.div_ceil(BLOCK_PAGES) as usize;
        PageTable { node: vec![NO_NODE; n], flags: vec![0; n], order: vec![0; n], cpupid: vec![CPUPID_UNSET; n], blocks: vec![Block::default(); nb] }
    }

    pub fn len(&self) -> u64 {
        self.node.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.node.is_empty()
    }

    pub fn block_len(&self, b: usize) -> u64 {
        (self.len() - b as u64 * BLOCK_PAGES).min(BLOCK_PAGES)
    }

    /// Every page of block `b` can be accessed without a fault (a write also needs the write bit).
    #[inline]
    pub fn block_clean(&self, b: usize, write: bool) -> bool {
        let k = &self.blocks[b];
        k.populated as u64 == self.block_len(b) && k.protnone == 0 && (!write || k.nowrite == 0)
    }

    /// The folio holding page `i`: (head index, pages).
    #[inline]
    pub fn folio(&self, i: u64) -> (u64, u64) {
        let nr = 1u64 << self.order[i as usize];
        (i & !(nr - 1), nr)
    }

    /// Page `i` belongs to a PMD-mapped THP.
    #[inline]
    pub fn pmd_mapped(&self, i: u64) -> bool {
        self.blocks[Self::blk(i)].pmd
    }

    pub fn populated(&self, i: u64) -> bool {
        self.node[i as usize] != NO_NODE
    }

    pub fn protnone(&self, i: u64) -> bool {
        self.flags[i as usize] & PTE_PROTNONE != 0
    }

    pub fn dirty(&self, i: u64) -> bool {
        self.flags[i as usize] & PTE_DIRTY != 0
    }

    pub fn writable(&self, i: u64) -> bool {
        self.flags[i as usize] & PTE_WRITE != 0
    }

    /// A store to page `i` needs no fault: present, not PROT_NONE, writable
    /// (an unpopulated page has no flags).
    #[inline]
    pub fn store_ok(&self, i: u64) -> bool {
        self.flags[i as usize] & (PTE_WRITE | PTE_PROTNONE) == PTE_WRITE
    }

    fn blk(i: u64) -> usize {
        (i / BLOCK_PAGES) as usize
    }

    fn counts_nowrite(f: u8) -> bool {
        f & (PTE_PROTNONE | PTE_WRITE) == 0
    }

    fn set_flags(&mut self, i: u64, f: u8) {
        let old = self.flags[i as usize];
        let k = &mut self.blocks[Self::blk(i)];
        if self.node[i as usize] != NO_NODE {
            k.protnone = k.protnone - (old & PTE_PROTNONE != 0) as u16 + (f & PTE_PROTNONE != 0) as u16;
            k.nowrite = k.nowrite - Self::counts_nowrite(old) as u16 + Self::counts_nowrite(f) as u16;
        }
        self.flags[i as usize] = f;
    }

    /// Map a new base page on `node` (do_anonymous_page / set_pte_at).
    pub fn populate(&mut self, i: u64, node: usize, flags: u8) {
        self.populate_folio(i, 0, node, flags, false);
    }

    /// Map a new folio of `order` at `head` on `node`; `pmd`: as one PMD-mapped THP.
    pub fn populate_folio(&mut self, head: u64, order: u8, node: usize, flags: u8, pmd: bool) {
        for i in head..head + (1u64 << order) {
            self.populate_one(i, order, node, flags);
        }
        if pmd {
            self.blocks[Self::blk(head)].pmd = true;
        }
    }

    /// Whether pages [head, head + nr) are all unmapped (pte_range_none).
    pub fn range_none(&self, head: u64, nr: u64) -> bool {
        head + nr <= self.len() && self.node[head as usize..(head + nr) as usize].iter().all(|&n| n == NO_NODE)
    }

    fn populate_one(&mut self, i: u64, order: u8, node: usize, flags: u8) {
        debug_assert!(!self.populated(i));
        self.node[i as usize] = node as u8;
        self.order[i as usize] = order;
        self.flags[i as usize] = 0;
        self.cpupid[i as usize] = CPUPID_UNSET;
        let k = &mut self.blocks[Self::blk(i)];
        k.node[node] += 1;
        k.populated += 1;
        k.nowrite += 1;
        self.set_flags(i, flags);
    }

    /// Unmap a page (exit_mmap / free); returns its node.
    pub fn unpopulate(&mut self, i: u64) -> usize {
        let n = self.node[i as usize] as usize;
        self.set_flags(i, PTE_WRITE); // drops the page's protnone/nowrite counts
        let k = &mut self.blocks[Self::blk(i)];
        k.node[n] -= 1;
        k.populated -= 1;
        // zap_huge_pmd: unmapping any page of a PMD-mapped THP removes the PMD
        k.pmd = false;
        self.node[i as usize] = NO_NODE;
        self.flags[i as usize] = 0;
        self.order[i as usize] = 0;
        self.cpupid[i as usize] = CPUPID_UNSET;
        n
    }

    /// pte_modify(pte, PAGE_NONE): PRESENT and RW cleared, pfn/dirty kept.
    pub fn make_protnone(&mut self, i: u64) {
        let f = (self.flags[i as usize] | PTE_PROTNONE) & !PTE_WRITE;
        self.set_flags(i, f);
    }

    /// Restore a hinting PTE to present, writable or not.
    pub fn make_present(&mut self, i: u64, write: bool) {
        let f = self.flags[i as usize] & !PTE_PROTNONE;
        self.set_flags(i, if write { f | PTE_WRITE } else { f & !PTE_WRITE });
    }

    /// A write fault made the PTE writable and dirty.
    pub fn make_writable(&mut self, i: u64) {
        let f = self.flags[i as usize] | PTE_WRITE | PTE_DIRTY;
        self.set_flags(i, f);
    }

    /// The page moved to `to` (migration keeps the PTE flags given by the caller).
    pub fn set_node(&mut self, i: u64, to: usize) {
        let from = self.node[i as usize] as usize;
        let k = &mut self.blocks[Self::blk(i)];
        k.node[from] -= 1;
        k.node[to] += 1;
        self.node[i as usize] = to as u8;
    }

    /// Recount block summaries from the page arrays (invariant checks only).
    pub fn recount(&self) -> Vec<Block> {
        let mut v = vec![Block::default(); self.blocks.len()];
        for i in 0..self.len() {
            if !self.populated(i) {
                continue;
            }
            let k = &mut v[Self::blk(i)];
            let f = self.flags[i as usize];
            k.node[self.node[i as usize] as usize] += 1;
            k.populated += 1;
            k.protnone += (f & PTE_PROTNONE != 0) as u16;
            k.nowrite += Self::counts_nowrite(f) as u16;
        }
        for (b, k) in v.iter_mut().enumerate() {
            k.pmd = self.blocks[b].pmd;
        }
        v
    }

    /// A PMD-mapped block is one populated order-9 folio whose pages agree (invariant checks).
    pub fn pmd_blocks_whole(&self) -> bool {
        self.blocks.iter().enumerate().filter(|(_, k)| k.pmd).all(|(b, k)| {
            let head = b as u64 * BLOCK_PAGES;
            let r = head as usize..(head + BLOCK_PAGES) as usize;
            k.populated as u64 == BLOCK_PAGES
                && self.order[r.clone()].iter().all(|&o| o == 9)
                && self.flags[r.clone()].iter().all(|&f| f == self.flags[head as usize])
                && self.node[r].iter().all(|&n| n == self.node[head as usize])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_page_state_stays_within_seven_bytes() {
        let pt = PageTable::new(1);
        let sz = std::mem::size_of_val(&pt.node[0]) + std::mem::size_of_val(&pt.flags[0]) + std::mem::size_of_val(&pt.order[0]) + std::mem::size_of_val(&pt.cpupid[0]);
        assert_eq!(sz, 7);
    }

    #[test]
    fn folio_head_is_naturally_aligned() {
        let mut pt = PageTable::new(1024);
        pt.populate_folio(16, 4, 1, PTE_WRITE, false);
        assert_eq!(pt.folio(16), (16, 16));
        assert_eq!(pt.folio(31), (16, 16));
        assert!(pt.range_none(0, 16) && !pt.range_none(0, 17));
        pt.populate_folio(512, 9, 0, PTE_WRITE, true);
        assert!(pt.pmd_mapped(700) && !pt.pmd_mapped(20));
        assert!(pt.pmd_blocks_whole());
        pt.make_protnone(600);
        assert!(!pt.pmd_blocks_whole(), "a PMD's pages change together");
        pt.unpopulate(520);
        assert!(!pt.pmd_mapped(700));
    }

    #[test]
    fn block_summary_tracks_protnone_and_write() {
        let mut pt = PageTable::new(1000);
        assert!(!pt.block_clean(0, false));
        for i in 0..512 {
            pt.populate(i, 1, PTE_WRITE);
        }
        assert!(pt.block_clean(0, true));
        pt.make_protnone(7);
        assert!(!pt.block_clean(0, false));
        pt.make_present(7, false);
        assert!(pt.block_clean(0, false) && !pt.block_clean(0, true));
        pt.make_writable(7);
        pt.set_node(3, 0);
        assert!(pt.block_clean(0, true));
        assert_eq!(pt.blocks[0].node[0], 1);
        assert_eq!(pt.recount(), pt.blocks);
        assert_eq!(pt.block_len(1), 488);
    }
}

//! Per-page state in one compact entry per 4 KiB page of a VMA, plus per-2 MiB block summaries
//! so that an access stream can cross a block whose pages need no fault in O(nodes). A block's
//! pages per node are kept beside the summaries, `nr_nodes` counts per block (the machine's
//! nodes, not MAX_NODES).
//!
//! Per page (`PageEntry`, 8 bytes, eight to a cache line, so that an event touches one line):
//! node, PTE flags, folio order, last_cpupid, and a sampled page's event generation. A folio of order o covers the 2^o pages from
//! its naturally aligned head; its pages share node and flags, changed together by the folio
//! operations. A PMD-mapped THP is an order-9 folio whose block has `pmd` set.

use crate::sim::prefetch::prefetch;
use crate::topology::MAX_NODES;

pub const NO_NODE: u8 = 0xff;
/// PTE is a NUMA hinting PROT_NONE entry (pte_protnone).
pub const PTE_PROTNONE: u8 = 1 << 0;
/// PTE is writable (pte_write).
pub const PTE_WRITE: u8 = 1 << 1;
/// Page has been written (pte_dirty).
pub const PTE_DIRTY: u8 = 1 << 2;
/// The folio waits in a CPU's LRU add batch: !PageLRU, one extra reference (mm/swap.rs).
pub const PG_LRU_BATCHED: u8 = 1 << 3;
/// The folio is on its node's active LRU list (PG_active; kept across a migration).
pub const PG_ACTIVE: u8 = 1 << 4;
/// The PTE maps an anonymous folio shared copy-on-write with other processes since a fork
/// (mapcount > 1): its state is the share's (mm/cow.rs), the PTE read-only.
pub const PG_COW: u8 = 1 << 5;
/// `last_cpupid` of a page that no hint fault has stamped (include/linux/mm.h: all ones).
pub const CPUPID_UNSET: u32 = u32::MAX;
/// Pages per PMD (HPAGE_PMD_NR): the block size of the summaries.
pub const BLOCK_PAGES: u64 = 512;

/// One page's state: what the kernel keeps in the PTE and in struct page/folio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct PageEntry {
    pub node: u8,
    pub flags: u8,
    /// Order of the folio holding the page (0 when unpopulated).
    pub order: u8,
    /// Generation of the page's latest random-access event (`workload/random/`; 1, that of
    /// the first-touch events, at the start): simulator state, not the kernel's, kept in what
    /// would be padding so that checking an event reads the line its fault needs anyway.
    pub event_gen: u8,
    pub last_cpupid: u32,
}

const EMPTY: PageEntry = PageEntry { node: NO_NODE, flags: 0, order: 0, event_gen: 1, last_cpupid: CPUPID_UNSET };

/// Summary of one 2 MiB block: how many pages are populated and how many need a fault (the
/// pages per node are in `PageTable::block_node`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Block {
    pub populated: u16,
    pub protnone: u16,
    /// Populated, present (not PROT_NONE) and not writable: a write takes a write fault.
    pub nowrite: u16,
    /// The block is one PMD-mapped THP (pmd_trans_huge).
    pub pmd: bool,
}

#[derive(Debug, Clone)]
pub struct PageTable {
    pub pages: Vec<PageEntry>,
    pub blocks: Vec<Block>,
    /// Populated pages of block b on node n at `b * nr_nodes + n`.
    block_node: Vec<u16>,
    nr_nodes: usize,
}

impl PageTable {
    pub fn new(npages: u64, nr_nodes: usize) -> Self {
        debug_assert!(nr_nodes <= MAX_NODES);
        let n = npages as usize;
        let nb = npages.div_ceil(BLOCK_PAGES) as usize;
        PageTable { pages: vec![EMPTY; n], blocks: vec![Block::default(); nb], block_node: vec![0; nb * nr_nodes], nr_nodes }
    }

    /// Prefetch page `i`'s entry and its block summary (speed only).
    #[inline]
    pub fn prefetch(&self, i: u64) {
        prefetch(&self.pages, i as usize);
        prefetch(&self.blocks, (i / BLOCK_PAGES) as usize);
    }

    /// Populated pages of block `b` per node (`nr_nodes` entries).
    #[inline]
    pub fn block_nodes(&self, b: usize) -> &[u16] {
        &self.block_node[b * self.nr_nodes..(b + 1) * self.nr_nodes]
    }

    /// Pages per node of the whole table.
    pub fn node_totals(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.nr_nodes];
        for b in 0..self.blocks.len() {
            for (o, &c) in out.iter_mut().zip(self.block_nodes(b)) {
                *o += c as u64;
            }
        }
        out
    }

    /// Add the populated pages of [first, end) per node to `out` (`nr_nodes` entries): whole
    /// blocks from their summaries, the ends page by page.
    pub fn count_range_nodes(&self, first: u64, end: u64, out: &mut [u64]) {
        let end = end.min(self.len());
        let mut i = first;
        while i < end {
            if i.is_multiple_of(BLOCK_PAGES) && i + BLOCK_PAGES <= end {
                for (o, &c) in out.iter_mut().zip(self.block_nodes(Self::blk(i))) {
                    *o += c as u64;
                }
                i += BLOCK_PAGES;
                continue;
            }
            if let Some(o) = out.get_mut(self.nid(i) as usize) {
                *o += 1;
            }
            i += 1;
        }
    }

    #[inline]
    fn block_node_mut(&mut self, i: u64, node: usize) -> &mut u16 {
        &mut self.block_node[Self::blk(i) * self.nr_nodes + node]
    }

    /// Node of page `i` (NO_NODE if unpopulated).
    #[inline]
    pub fn nid(&self, i: u64) -> u8 {
        self.pages[i as usize].node
    }

    /// The page's last_cpupid (folio_last_cpupid).
    #[inline]
    pub fn last_cpupid(&self, i: u64) -> u32 {
        self.pages[i as usize].last_cpupid
    }

    pub fn set_last_cpupid(&mut self, i: u64, v: u32) {
        self.pages[i as usize].last_cpupid = v;
    }

    pub fn len(&self) -> u64 {
        self.pages.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
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
        let nr = 1u64 << self.pages[i as usize].order;
        (i & !(nr - 1), nr)
    }

    /// Page `i` belongs to a PMD-mapped THP.
    #[inline]
    pub fn pmd_mapped(&self, i: u64) -> bool {
        self.blocks[Self::blk(i)].pmd
    }

    pub fn populated(&self, i: u64) -> bool {
        self.pages[i as usize].node != NO_NODE
    }

    pub fn protnone(&self, i: u64) -> bool {
        self.pages[i as usize].flags & PTE_PROTNONE != 0
    }

    pub fn dirty(&self, i: u64) -> bool {
        self.pages[i as usize].flags & PTE_DIRTY != 0
    }

    pub fn writable(&self, i: u64) -> bool {
        self.pages[i as usize].flags & PTE_WRITE != 0
    }

    /// A store to page `i` needs no fault: present, not PROT_NONE, writable
    /// (an unpopulated page has no flags).
    #[inline]
    pub fn store_ok(&self, i: u64) -> bool {
        self.pages[i as usize].flags & (PTE_WRITE | PTE_PROTNONE) == PTE_WRITE
    }

    fn blk(i: u64) -> usize {
        (i / BLOCK_PAGES) as usize
    }

    fn counts_nowrite(f: u8) -> bool {
        f & (PTE_PROTNONE | PTE_WRITE) == 0
    }

    fn set_flags(&mut self, i: u64, f: u8) {
        let e = &mut self.pages[i as usize];
        let old = e.flags;
        let k = &mut self.blocks[Self::blk(i)];
        if e.node != NO_NODE {
            k.protnone = k.protnone - (old & PTE_PROTNONE != 0) as u16 + (f & PTE_PROTNONE != 0) as u16;
            k.nowrite = k.nowrite - Self::counts_nowrite(old) as u16 + Self::counts_nowrite(f) as u16;
        }
        e.flags = f;
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

    /// Split the folio holding page `i` into base pages that keep its node, PTE flags and
    /// last_cpupid; a PMD-mapped THP's PMD becomes a table of PTEs. Returns (head, pages).
    // mm/huge_memory.c: __split_huge_pmd_locked, __split_huge_page_tail
    pub fn split_folio(&mut self, i: u64) -> (u64, u64) {
        let (head, nr) = self.folio(i);
        let cpupid = self.pages[head as usize].last_cpupid;
        for e in &mut self.pages[head as usize..(head + nr) as usize] {
            (e.order, e.last_cpupid) = (0, cpupid);
        }
        if nr == BLOCK_PAGES {
            self.blocks[Self::blk(head)].pmd = false;
        }
        (head, nr)
    }

    /// Whether pages [head, head + nr) are all unmapped (pte_range_none).
    pub fn range_none(&self, head: u64, nr: u64) -> bool {
        head + nr <= self.len() && self.pages[head as usize..(head + nr) as usize].iter().all(|e| e.node == NO_NODE)
    }

    fn populate_one(&mut self, i: u64, order: u8, node: usize, flags: u8) {
        debug_assert!(!self.populated(i));
        let e = &mut self.pages[i as usize];
        (e.node, e.order, e.flags, e.last_cpupid) = (node as u8, order, 0, CPUPID_UNSET);
        *self.block_node_mut(i, node) += 1;
        let k = &mut self.blocks[Self::blk(i)];
        k.populated += 1;
        k.nowrite += 1;
        self.set_flags(i, flags);
    }

    /// Unmap every page (exit_mmap); returns the pages freed per node, from the block
    /// summaries. Event generations stay, as in `unpopulate`.
    pub fn unmap_all(&mut self) -> [u64; MAX_NODES] {
        let mut freed = [0u64; MAX_NODES];
        for (f, c) in freed.iter_mut().zip(self.node_totals()) {
            *f = c;
        }
        for e in &mut self.pages {
            *e = PageEntry { event_gen: e.event_gen, ..EMPTY };
        }
        self.blocks.fill(Block::default());
        self.block_node.fill(0);
        freed
    }

    /// Unmap a page (exit_mmap / free); returns its node.
    pub fn unpopulate(&mut self, i: u64) -> usize {
        let n = self.pages[i as usize].node as usize;
        self.set_flags(i, PTE_WRITE); // drops the page's protnone/nowrite counts
        *self.block_node_mut(i, n) -= 1;
        let k = &mut self.blocks[Self::blk(i)];
        k.populated -= 1;
        // zap_huge_pmd: unmapping any page of a PMD-mapped THP removes the PMD
        k.pmd = false;
        // (the event generation stays: an event drawn for the page may still be pending)
        let e = &mut self.pages[i as usize];
        (e.node, e.flags, e.order, e.last_cpupid) = (NO_NODE, 0, 0, CPUPID_UNSET);
        n
    }

    /// pte_modify(pte, PAGE_NONE): PRESENT and RW cleared, pfn/dirty kept.
    pub fn make_protnone(&mut self, i: u64) {
        let f = (self.pages[i as usize].flags | PTE_PROTNONE) & !PTE_WRITE;
        self.set_flags(i, f);
    }

    /// Restore a hinting PTE to present, writable or not.
    pub fn make_present(&mut self, i: u64, write: bool) {
        let f = self.pages[i as usize].flags & !PTE_PROTNONE;
        self.set_flags(i, if write { f | PTE_WRITE } else { f & !PTE_WRITE });
    }

    /// A write fault made the PTE writable and dirty.
    pub fn make_writable(&mut self, i: u64) {
        let f = self.pages[i as usize].flags | PTE_WRITE | PTE_DIRTY;
        self.set_flags(i, f);
    }

    /// The PTE's dirty bit: cleared when a migration rebuilds the PTE clean, set by a store
    /// (the CPU sets it without a fault on a writable PTE).
    pub fn set_dirty(&mut self, i: u64, on: bool) {
        let e = &mut self.pages[i as usize];
        e.flags = if on { e.flags | PTE_DIRTY } else { e.flags & !PTE_DIRTY };
    }

    /// The folio at `i` waits in an LRU add batch (set) or joined the LRU (clear).
    pub fn set_lru_batched(&mut self, i: u64, on: bool) {
        let e = &mut self.pages[i as usize];
        e.flags = if on { e.flags | PG_LRU_BATCHED } else { e.flags & !PG_LRU_BATCHED };
    }

    /// Set or clear PG_active on every page of the folio at `i` (its pages agree).
    pub fn set_active(&mut self, i: u64, on: bool) {
        let (head, nr) = self.folio(i);
        for e in &mut self.pages[head as usize..(head + nr) as usize] {
            e.flags = if on { e.flags | PG_ACTIVE } else { e.flags & !PG_ACTIVE };
        }
    }

    pub fn active(&self, i: u64) -> bool {
        self.pages[i as usize].flags & PG_ACTIVE != 0
    }

    #[inline]
    pub fn cow(&self, i: u64) -> bool {
        self.pages[i as usize].flags & PG_COW != 0
    }

    /// Set or clear PG_COW (the PTE's write bit is the caller's).
    pub fn set_cow(&mut self, i: u64, on: bool) {
        let e = &mut self.pages[i as usize];
        e.flags = if on { e.flags | PG_COW } else { e.flags & !PG_COW };
    }

    pub fn lru_batched(&self, i: u64) -> bool {
        self.pages[i as usize].flags & PG_LRU_BATCHED != 0
    }

    /// The page moved to `to` (migration keeps the PTE flags given by the caller).
    pub fn set_node(&mut self, i: u64, to: usize) {
        let from = self.pages[i as usize].node as usize;
        *self.block_node_mut(i, from) -= 1;
        *self.block_node_mut(i, to) += 1;
        self.pages[i as usize].node = to as u8;
    }

    /// Recount block summaries from the page arrays (invariant checks only).
    pub fn recount(&self) -> (Vec<Block>, Vec<u16>) {
        let mut v = vec![Block::default(); self.blocks.len()];
        let mut nodes = vec![0u16; self.block_node.len()];
        for i in 0..self.len() {
            if !self.populated(i) {
                continue;
            }
            nodes[Self::blk(i) * self.nr_nodes + self.pages[i as usize].node as usize] += 1;
            let k = &mut v[Self::blk(i)];
            let f = self.pages[i as usize].flags;
            k.populated += 1;
            k.protnone += (f & PTE_PROTNONE != 0) as u16;
            k.nowrite += Self::counts_nowrite(f) as u16;
        }
        for (b, k) in v.iter_mut().enumerate() {
            k.pmd = self.blocks[b].pmd;
        }
        (v, nodes)
    }

    /// The block summaries and per-node counts agree with the page entries.
    pub fn summaries_agree(&self) -> bool {
        let (blocks, nodes) = self.recount();
        blocks == self.blocks && nodes == self.block_node
    }

    /// A PMD-mapped block is one populated order-9 folio whose pages agree (invariant checks).
    pub fn pmd_blocks_whole(&self) -> bool {
        self.blocks.iter().enumerate().filter(|(_, k)| k.pmd).all(|(b, k)| {
            let head = b as u64 * BLOCK_PAGES;
            let h = self.pages[head as usize];
            k.populated as u64 == BLOCK_PAGES && self.pages[head as usize..(head + BLOCK_PAGES) as usize].iter().all(|e| e.order == 9 && e.flags == h.flags && e.node == h.node)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_entry_is_eight_bytes() {
        assert_eq!(std::mem::size_of::<PageEntry>(), 8, "eight pages per cache line");
    }

    #[test]
    fn folio_head_is_naturally_aligned() {
        let mut pt = PageTable::new(1024, 2);
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
        let mut pt = PageTable::new(1000, 2);
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
        assert_eq!(pt.block_nodes(0), [1, 511]);
        assert!(pt.summaries_agree());
        assert_eq!(pt.block_len(1), 488);
    }

    /// Counting a range per node from the block summaries agrees with counting its pages.
    #[test]
    fn range_counts_match_the_pages() {
        let mut pt = PageTable::new(2000, 3);
        for i in (0..2000).step_by(7) {
            pt.populate(i, (i % 3) as usize, PTE_WRITE);
        }
        for (first, end) in [(0, 2000), (5, 1500), (512, 1024), (700, 3000), (10, 11)] {
            let mut got = [0u64; 3];
            pt.count_range_nodes(first, end, &mut got);
            let want: Vec<u64> = (0..3).map(|n| (first..end.min(2000)).filter(|&i| pt.populated(i) && pt.nid(i) as usize == n).count() as u64).collect();
            assert_eq!(got[..], want[..], "[{first}, {end})");
        }
    }

    /// mm/mmap.c: exit_mmap — unmapping a whole table frees each populated page once, counted
    /// per node from the block summaries, and leaves nothing mapped.
    #[test]
    fn unmap_all_frees_every_page_once() {
        let mut pt = PageTable::new(2000, 2);
        for i in (0..1024).step_by(3) {
            pt.populate(i, (i % 2) as usize, PTE_WRITE);
        }
        pt.populate_folio(1024, 9, 1, PTE_WRITE, true);
        pt.make_protnone(6);
        pt.pages[9].event_gen = 7;
        let want: Vec<u64> = (0..2).map(|n| (0..2000).filter(|&i| pt.populated(i) && pt.nid(i) as usize == n).count() as u64).collect();
        let freed = pt.unmap_all();
        assert_eq!(freed[..2], want[..]);
        assert!(freed[2..].iter().all(|&f| f == 0));
        assert!((0..2000).all(|i| !pt.populated(i) && !pt.protnone(i)));
        assert!(pt.summaries_agree());
        assert!(pt.blocks.iter().all(|k| *k == Block::default()));
        assert_eq!(pt.node_totals(), [0, 0]);
        assert_eq!(pt.pages[9].event_gen, 7, "a pending event's generation stays");
    }
}

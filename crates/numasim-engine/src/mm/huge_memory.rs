//! Transparent huge pages and multi-size THP (mm/huge_memory.c): which folio orders a fault may
//! allocate, PMD-mapped THP faults, and the fragmentation that makes large allocations fail.

use crate::kernel::Kernel;
use crate::mm::pgtable::BLOCK_PAGES;
use crate::mm::types::{VM_HUGEPAGE, VM_NOHUGEPAGE};
use serde::Serialize;

/// HPAGE_PMD_ORDER on x86-64 with 4 KiB pages.
pub const HPAGE_PMD_ORDER: u8 = 9;
/// Orders an anonymous mTHP may have (THP_ORDERS_ALL_ANON: 2 ..= PMD order; order 1 is never used).
pub const ANON_ORDERS: std::ops::RangeInclusive<u8> = 2..=HPAGE_PMD_ORDER;

/// /sys/kernel/mm/transparent_hugepage/enabled and hugepages-<size>kB/enabled values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ThpMode {
    Always,
    Madvise,
    Never,
    /// Per-size only: follow the top-level setting.
    Inherit,
}

impl ThpMode {
    pub fn parse(s: &str, per_size: bool) -> Option<ThpMode> {
        match s {
            "always" => Some(ThpMode::Always),
            "madvise" => Some(ThpMode::Madvise),
            "never" => Some(ThpMode::Never),
            "inherit" if per_size => Some(ThpMode::Inherit),
            _ => None,
        }
    }
}

/// The THP sysfs settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThpConfig {
    /// transparent_hugepage/enabled (the PMD size and every size set to `inherit`).
    pub enabled: ThpMode,
    /// hugepages-<size>kB/enabled by order (index 0 and 1 unused).
    pub sizes: [ThpMode; 10],
}

impl Default for ThpConfig {
    /// The model's default is no THP, so base-page experiments stay base-page; the kernel's
    /// per-size defaults are kept: 2048 kB inherits, smaller sizes are off.
    fn default() -> Self {
        let mut sizes = [ThpMode::Never; 10];
        sizes[HPAGE_PMD_ORDER as usize] = ThpMode::Inherit;
        ThpConfig { enabled: ThpMode::Never, sizes }
    }
}

/// sysfs directory size name of an order: 16 kB .. 2048 kB.
pub fn size_name(order: u8) -> String {
    format!("{}kB", 4u64 << order)
}

/// The order of a size written as `16K`, `16kB`, `2M` or `2048K`; only anonymous THP orders.
pub fn parse_size(s: &str) -> Option<u8> {
    let t = s.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = num.parse().ok()?;
    let kib = match unit {
        "K" | "k" | "kB" | "KB" | "KiB" => n,
        "M" | "MB" | "MiB" => n * 1024,
        _ => return None,
    };
    ANON_ORDERS.into_iter().find(|&o| 4u64 << o == kib)
}

impl ThpConfig {
    /// Orders a fault in a VMA with `vm_flags` may use, as a bitmask (bit o = order o).
    // mm/huge_memory.c: __thp_vma_allowable_orders (anon, fault path)
    pub fn allowable_orders(&self, vm_flags: u32) -> u16 {
        let mut mask = 0;
        if vm_flags & VM_NOHUGEPAGE != 0 {
            return 0; // vma_thp_disabled
        }
        for o in ANON_ORDERS {
            let mode = match self.sizes[o as usize] {
                ThpMode::Inherit => self.enabled,
                m => m,
            };
            if mode == ThpMode::Always || (mode == ThpMode::Madvise && vm_flags & VM_HUGEPAGE != 0) {
                mask |= 1 << o;
            }
        }
        mask
    }
}

impl Kernel {
    /// Does a no-compaction allocation of `order` on a node find no free block? Orders below
    /// the pageblock fail proportionally less often (documented assumption, docs/model.md).
    pub fn high_order_fails(&mut self, order: u8) -> bool {
        let f = self.fragmentation;
        if order == 0 || f <= 0.0 {
            return false;
        }
        let p = f * order as f64 / HPAGE_PMD_ORDER as f64;
        let u = self.frag_rng.unit();
        u < p
    }

    /// First touch inside a VMA that allows THP: a PMD-mapped THP when the whole 2 MiB block is
    /// unmapped and inside the VMA, else the largest enabled mTHP order whose aligned range is
    /// unmapped, falling back order by order when the allocation fails. Returns (head, order,
    /// node), or None for the base-page path.
    // mm/huge_memory.c: do_huge_pmd_anonymous_page; mm/memory.c: alloc_anon_folio
    pub fn alloc_anon_folio(&mut self, t: usize, vma: usize, idx: u64) -> Option<(u64, u8, usize)> {
        let (mm, cpu) = (self.tasks[t].mm, self.tasks[t].cpu);
        let v = &self.mms[mm].vmas[vma];
        let orders = self.thp_allowable_orders(v.flags);
        if orders == 0 {
            return None;
        }
        let pol = v.policy.unwrap_or(self.tasks[t].policy);
        let len = v.pt.len();
        for o in ANON_ORDERS.rev().filter(|o| orders & (1 << o) != 0) {
            let nr = 1u64 << o;
            let head = idx & !(nr - 1);
            // thp_vma_suitable_order and pte_range_none (pmd_none for the PMD order)
            if head + nr > len || !self.mms[mm].vmas[vma].pt.range_none(head, nr) {
                continue;
            }
            match self.alloc_pages(&pol, cpu, o) {
                Some(node) => {
                    self.thp_stat(o, ThpStat::FaultAlloc);
                    return Some((head, o, node));
                }
                None => self.thp_stat(o, ThpStat::FaultFallback),
            }
        }
        None
    }

    fn thp_stat(&mut self, order: u8, s: ThpStat) {
        self.mthp_stats[order as usize][s as usize] += 1;
        if order == HPAGE_PMD_ORDER {
            let e = match s {
                ThpStat::FaultAlloc => crate::vmstat::VmEvent::ThpFaultAlloc,
                ThpStat::FaultFallback => crate::vmstat::VmEvent::ThpFaultFallback,
            };
            self.count(e, 1);
        }
    }

    /// A write to a read-only PMD-mapped THP of an exclusive anonymous folio: the whole PMD
    /// becomes writable in one fault.
    // mm/huge_memory.c: do_huge_pmd_wp_page
    pub fn do_huge_pmd_wp_page(&mut self, t: usize, vma: usize, idx: u64) -> f64 {
        let mm = self.tasks[t].mm;
        let head = idx & !(BLOCK_PAGES - 1);
        let pt = &mut self.mms[mm].vmas[vma].pt;
        for i in head..head + BLOCK_PAGES {
            pt.make_writable(i);
        }
        self.count(crate::vmstat::VmEvent::Pgfault, 1);
        self.cost.fault_entry_exit_ns
    }
}

/// Per-size mTHP counters (hugepages-<size>kB/stats/).
#[derive(Debug, Clone, Copy)]
pub enum ThpStat {
    /// anon_fault_alloc
    FaultAlloc = 0,
    /// anon_fault_fallback
    FaultFallback = 1,
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testutil::{small_kernel, small_kernel_from, SMALL};
    use crate::vmstat::VmEvent;

    fn mthp(sizes: &str, frag: f64) -> crate::kernel::Kernel {
        let machine = SMALL.replace("[machine]\n", &format!("[machine]\nfragmentation = {frag}\n"));
        small_kernel_from(&format!("[kernel.thp]\nenabled = \"always\"\nsizes = {{ {sizes} }}\n{machine}"))
    }

    /// mm/huge_memory.c: do_huge_pmd_anonymous_page — the main thread's first touch of the
    /// 64 MiB buffer maps it with 32 PMD-sized THPs.
    #[test]
    fn first_touch_maps_pmd_thp() {
        let k = mthp("", 0.0);
        let pt = &k.mms[0].vmas[0].pt;
        assert!(pt.blocks.iter().all(|b| b.pmd));
        assert_eq!(k.vmstat.get(VmEvent::ThpFaultAlloc), 32);
        assert_eq!(k.vmstat.get(VmEvent::Pgfault), 32, "one fault per PMD");
    }

    /// mm/memory.c: alloc_anon_folio — when no PMD-sized block is free (fragmentation 1), the
    /// fault falls back to the next enabled order (64 kB), counting thp_fault_fallback.
    #[test]
    fn folio_order_falls_back_when_fragmented() {
        let k = mthp("\"64K\" = \"always\"", 1.0);
        let pt = &k.mms[0].vmas[0].pt;
        assert!(pt.blocks.iter().all(|b| !b.pmd));
        assert_eq!(k.vmstat.get(VmEvent::ThpFaultAlloc), 0);
        assert_eq!(k.vmstat.get(VmEvent::ThpFaultFallback), 32, "one failed PMD attempt per 2 MiB block");
        // order 4 fails with probability 4/9: some 64 kB folios, the rest base pages
        assert!(k.mthp_stats[4][0] > 0 && k.mthp_stats[4][1] > 0);
        let orders: std::collections::BTreeSet<u8> = pt.pages.iter().map(|e| e.order).collect();
        assert_eq!(orders.into_iter().collect::<Vec<_>>(), vec![0, 4]);
        let base = pt.pages.iter().filter(|e| e.order == 0).count() as u64;
        assert_eq!(base, k.mthp_stats[4][1] * 16, "a failed 64 kB fault maps one base page per page");
    }

    /// mm/memory.c: alloc_anon_folio (pte_range_none) — an order is only used when every PTE of
    /// its aligned range is empty.
    #[test]
    fn a_mapped_page_blocks_the_larger_orders() {
        let mut k = small_kernel("[kernel.thp]\nsizes = { \"16K\" = \"always\", \"64K\" = \"always\" }");
        let t = crate::testutil::thread(&k, 0);
        let mm = k.tasks[t].mm;
        let v = k.mms[mm].mmap_anon(1024, crate::mm::types::VM_READ | crate::mm::types::VM_WRITE);
        k.mms[mm].vmas[v].pt.populate(5, 0, crate::mm::pgtable::PTE_WRITE);
        k.nodes[0].used += 1;
        k.mms[mm].node_pages[0] += 1;
        let before = (k.mthp_stats[2][0], k.mthp_stats[4][0]);
        for (idx, folio) in [(6, (6, 1)), (9, (8, 4)), (20, (16, 16))] {
            k.do_anonymous_page(t, v, idx).unwrap();
            assert_eq!(k.mms[mm].vmas[v].pt.folio(idx), folio, "fault at {idx}");
        }
        assert_eq!((k.mthp_stats[2][0] - before.0, k.mthp_stats[4][0] - before.1), (1, 1));
    }

    #[test]
    fn sizes_parse_to_anonymous_orders() {
        assert_eq!(parse_size("16K"), Some(2));
        assert_eq!(parse_size("64kB"), Some(4));
        assert_eq!(parse_size("2M"), Some(9));
        assert_eq!(parse_size("2048K"), Some(9));
        assert_eq!(parse_size("8K"), None, "order 1 is not an anonymous mTHP size");
        assert_eq!(parse_size("4K"), None);
        assert_eq!(parse_size("12K"), None);
        assert_eq!(size_name(2), "16kB");
    }

    /// mm/huge_memory.c: __thp_vma_allowable_orders — `inherit` follows the top-level mode,
    /// `madvise` needs VM_HUGEPAGE.
    #[test]
    fn allowable_orders_follow_sysfs_modes() {
        let mut c = ThpConfig::default();
        assert_eq!(c.allowable_orders(0), 0);
        c.enabled = ThpMode::Always;
        assert_eq!(c.allowable_orders(0), 1 << 9);
        c.enabled = ThpMode::Madvise;
        c.sizes[4] = ThpMode::Always;
        assert_eq!(c.allowable_orders(0), 1 << 4);
        assert_eq!(c.allowable_orders(VM_HUGEPAGE), (1 << 4) | (1 << 9));
    }
}

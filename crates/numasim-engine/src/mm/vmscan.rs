//! kswapd and demotion during reclaim (mm/vmscan.c, tiering.md §3.9-3.10). Only demotion is
//! modelled as reclaim (anonymous memory without swap has nothing else to reclaim), so
//! kswapd does nothing unless `demotion_enabled` and the node has a demotion target.
//!
//! The LRU is one list per node, oldest first, fed where folios leave a CPU's LRU add batch.
//! The access model decides `folio_referenced`, not every access: a page of a random-access
//! VMA was referenced since its last check with probability 1 - exp(-p(k) x accesses since),
//! a page of any other VMA (streams that sweep their memory) if its process has a runnable
//! task.
//! A referenced folio is rotated to the young end (activation and second chance folded in
//! one list: an approximation of the active/inactive lists).
//!
//! kswapd is a kernel thread: it reclaims at the pace its CPU time allows, one tick of CPU
//! per tick while awake (on an idle CPU of its node: it takes no time from the node's tasks),
//! each folio it checks costing a PTE access-bit test (`pte_update_ns`) and each demotion what
//! migrate_pages charges its caller. It stays awake across ticks until the node is balanced,
//! so allocations and promotions that need free memory fail meanwhile.

use crate::kernel::Kernel;
use crate::mm::migrate::MigrateMode;
use crate::mm::rmap::PageRef;
use crate::vmstat::VmEvent;

/// A folio on a node's LRU and the access count of its process (or the time, ns) when it
/// was last checked.
#[derive(Debug, Clone, Copy)]
pub struct LruEntry {
    pub page: PageRef,
    pub stamp: f64,
}

/// Folios isolated and demoted at once (SWAP_CLUSTER_MAX).
const SWAP_CLUSTER_MAX: usize = 32;

impl Kernel {
    // mm/vmscan.c: wakeup_kswapd (a node without memory has no kswapd to wake)
    pub fn wakeup_kswapd(&mut self, node: usize) {
        if self.lru_tracking && self.nodes[node].present > 0 {
            self.nodes[node].kswapd_wake = true;
        }
    }

    /// Every node the allocation may use (the fast path failed at the low watermark).
    // mm/page_alloc.c: wake_all_kswapds
    pub fn wake_all_kswapds(&mut self, preferred: usize, mask: crate::topology::NodeMask) {
        if !self.lru_tracking {
            return;
        }
        for i in 0..self.topo.nr_nodes {
            let n = self.topo.nodes_by_distance(preferred)[i];
            if mask & (1 << n) != 0 && self.nodes[n].free() < self.nodes[n].wmark_low {
                self.wakeup_kswapd(n);
            }
        }
    }

    /// The check stamp of a folio joining the LRU now.
    fn lru_stamp(&self, mm: usize, vma: usize) -> f64 {
        use crate::mm::access_notifier::AccessNotifier;
        match self.access_subscription(mm, vma) {
            Some(s) => self.samplers[s].counter,
            None => self.now as f64,
        }
    }

    /// A folio leaves the LRU add batch for its node's LRU (the young end).
    // mm/swap.c: lru_add (folio_batch_move_lru)
    pub fn lru_add_tail(&mut self, page: PageRef) {
        let Some(v) = self.mms.get(page.mm).and_then(|m| m.vmas.get(page.vma)) else { return };
        if page.idx >= v.pt.len() || !v.pt.populated(page.idx) {
            return;
        }
        let node = v.pt.nid(page.idx) as usize;
        let stamp = self.lru_stamp(page.mm, page.vma);
        self.nodes[node].lru.push_back(LruEntry { page, stamp });
    }

    /// Give every awake kswapd this tick's CPU time (at the tick's end); one that balanced its
    /// node, or found nothing to demote, goes back to sleep.
    // mm/vmscan.c: kswapd, kswapd_try_to_sleep
    pub fn run_kswapds(&mut self) {
        if !self.lru_tracking {
            return;
        }
        for n in 0..self.topo.nr_nodes {
            if !self.nodes[n].kswapd_wake {
                continue;
            }
            // a batch may overrun the tick: the debt is paid from the next one
            let m = &mut self.nodes[n];
            m.kswapd_credit_ns = (m.kswapd_credit_ns + self.tick_ns as f64).min(self.tick_ns as f64);
            if self.balance_pgdat(n) {
                let m = &mut self.nodes[n];
                (m.kswapd_wake, m.kswapd_credit_ns) = (false, 0.0);
            }
        }
    }

    /// Reclaim (demote) until the node's free pages reach the promo watermark in tiering mode,
    /// else the high one, or until the LRU has nothing cold left, within kswapd's CPU credit.
    /// Returns false when the credit ran out first (kswapd stays awake).
    // mm/vmscan.c: balance_pgdat, pgdat_balanced (WMARK_PROMO with NUMA_BALANCING_MEMORY_TIERING)
    fn balance_pgdat(&mut self, node: usize) -> bool {
        let m = &self.nodes[node];
        let mark = if self.tiering_mode() { m.wmark_promo } else { m.wmark_high };
        let mut want = mark.saturating_sub(m.free());
        let Some(&target) = self.tiers.demotion[node].first() else { return true };
        // every folio is looked at at most twice: a referenced one once more after its rotation
        let mut budget = 2 * self.nodes[node].lru.len();
        // processes with a runnable task (what a page outside random-access VMAs asks)
        let mut running = vec![false; self.mms.len()];
        for t in self.tasks.iter().filter(|t| t.runnable()) {
            running[t.mm] = true;
        }
        while want > 0 && budget > 0 {
            if self.nodes[node].kswapd_credit_ns <= 0.0 {
                return false;
            }
            let mut batch = Vec::new();
            let mut checked = 0u64;
            while batch.len() < SWAP_CLUSTER_MAX.min(want as usize) && budget > 0 {
                budget -= 1;
                checked += 1;
                let Some(e) = self.nodes[node].lru.pop_front() else { break };
                if !self.lru_entry_valid(e.page, node) {
                    continue;
                }
                if self.folio_referenced(e, &running) {
                    let stamp = self.lru_stamp(e.page.mm, e.page.vma);
                    self.nodes[node].lru.push_back(LruEntry { stamp, ..e });
                } else {
                    batch.push(e.page);
                }
            }
            let mut cpu_ns = checked as f64 * self.cost.pte_update_ns;
            let demoted = if batch.is_empty() { 0 } else { self.demote_folio_list(&batch, node, target, &mut cpu_ns) };
            let m = &mut self.nodes[node];
            m.kswapd_credit_ns -= cpu_ns;
            m.kswapd_cpu_ns += cpu_ns;
            if demoted == 0 {
                break; // nothing cold, or the lower tier is full: no swap to fall back on
            }
            want = want.saturating_sub(demoted);
        }
        true
    }

    fn lru_entry_valid(&self, p: PageRef, node: usize) -> bool {
        let Some(m) = self.mms.get(p.mm).filter(|m| !m.exited) else { return false };
        let Some(v) = m.vmas.get(p.vma) else { return false };
        p.idx < v.pt.len() && v.pt.populated(p.idx) && v.pt.folio(p.idx).0 == p.idx && v.pt.nid(p.idx) as usize == node && v.shmem.is_none()
    }

    /// Whether the folio was accessed since its entry was stamped (its accessed bits, which
    /// the check clears); `running[mm]`: the process has a runnable task.
    // mm/rmap.c: folio_referenced
    fn folio_referenced(&mut self, e: LruEntry, running: &[bool]) -> bool {
        use crate::mm::access_notifier::AccessNotifier;
        let PageRef { mm, vma, idx } = e.page;
        match self.access_subscription(mm, vma) {
            Some(s) => {
                let nr = self.mms[mm].vmas[vma].pt.folio(idx).1;
                let smp = &self.samplers[s];
                let p: f64 = (idx..idx + nr).filter_map(|i| smp.weight.get(i as usize)).sum();
                let accesses = (smp.counter - e.stamp).max(0.0);
                self.reclaim_rng.unit() < 1.0 - (-p * accesses).exp()
            }
            None => running[mm],
        }
    }

    /// Migrate `pages` (on `node`) to the lower tier: the preferred target, no reclaim there.
    /// Returns the base pages demoted.
    // mm/vmscan.c: demote_folio_list (MR_DEMOTION, MIGRATE_ASYNC), shrink_inactive_list
    fn demote_folio_list(&mut self, pages: &[PageRef], node: usize, target: usize, cpu_ns: &mut f64) -> u64 {
        let cpu = self.topo.node_cpus[node].first().copied().unwrap_or(0);
        let out = self.migrate_pages(pages, target, cpu, MigrateMode::Async);
        self.count(VmEvent::PgdemoteKswapd, out.succeeded);
        *cpu_ns += out.cost;
        out.succeeded
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::tiered_kernel;

    /// mm/vmscan.c: balance_pgdat + demote_folio_list — a woken kswapd of a full DRAM node
    /// demotes its coldest folios to the lower tier until free pages reach the promo watermark
    /// (tiering mode), counting pgdemote_kswapd, at most a tick of CPU per tick (plus the
    /// batch that overran), awake until then; without demotion_enabled it does nothing.
    #[test]
    fn kswapd_demotes_to_the_promo_watermark() {
        for demotion in [true, false] {
            let mut k = tiered_kernel(&format!("demotion_enabled = {demotion}"), 3);
            let (before, used1) = (k.nodes[0].used, k.nodes[1].used);
            let free = 0;
            k.nodes[0].used = k.nodes[0].present - free;
            let extra = k.nodes[0].used - before;
            k.wakeup_kswapd(0);
            let mut ticks = 0;
            while k.nodes[0].kswapd_wake && ticks < 1000 {
                k.run_kswapds();
                ticks += 1;
                let (cpu, tick) = (k.nodes[0].kswapd_cpu_ns, k.tick_ns as f64);
                assert!(cpu <= tick * ticks as f64 + 1e6, "{cpu} ns of kswapd CPU in {ticks} ticks");
            }
            let demoted = k.vmstat.get(crate::vmstat::VmEvent::PgdemoteKswapd);
            if demotion {
                assert!(ticks > 1, "demotion takes CPU time: more than one tick ({demoted} pages)");
                assert!(k.nodes[0].free() >= k.nodes[0].wmark_promo, "balanced at promo: {} < {}", k.nodes[0].free(), k.nodes[0].wmark_promo);
                assert_eq!(k.nodes[1].used, used1 + demoted, "demoted pages land on the CXL node");
                assert!(demoted > 0 && demoted <= k.nodes[0].wmark_promo - free + 32);
            } else {
                assert_eq!((demoted, k.nodes[1].used), (0, used1));
            }
            k.nodes[0].used -= extra;
        }
    }
}

//! kswapd and demotion during reclaim (mm/vmscan.c, tiering.md §3.9-3.10). Only demotion is
//! modelled as reclaim (anonymous memory without swap has nothing else to reclaim), so
//! kswapd does nothing unless `demotion_enabled` and the node has a demotion target.
//!
//! The LRU of a node is an inactive and an active list, oldest first (the classic LRU; MGLRU is
//! not modelled). A new anonymous folio joins the inactive list where it leaves a CPU's LRU add
//! batch (b518154e59aa, v5.9: workingset protection on the anonymous LRU). The access model
//! decides `folio_referenced`, not every access: a page of a random-access VMA was referenced
//! since its last check with probability 1 - exp(-p(k) x accesses since), a page of any other
//! VMA (streams that sweep their memory) if its process has a runnable task. On the inactive
//! list a referenced folio is kept once (PG_referenced) and activated when referenced again
//! (folio_check_references); an unreferenced one is demoted. When the inactive list is low
//! against the active one (inactive_is_low), the oldest active folios are deactivated, their
//! accessed bits cleared (shrink_active_list: anonymous folios are never kept active).
//!
//! kswapd is a kernel thread: it reclaims at the pace its CPU time allows, one tick of CPU
//! per tick while awake (on an idle CPU of its node: it takes no time from the node's tasks),
//! each folio it checks costing a PTE access-bit test (`pte_update_ns`) and each demotion what
//! migrate_pages charges its caller. It stays awake across ticks until the node is balanced,
//! so promotions that need free memory fail meanwhile.
//!
//! Direct reclaim: a fault allocation that finds every allowed node below its min watermark
//! runs the same LRU walk itself (`try_to_free_pages`, SWAP_CLUSTER_MAX pages, counted as
//! pgdemote_direct), its time added to the fault's system time (mm/page_alloc.rs).

use crate::kernel::Kernel;
use crate::mm::migrate::MigrateMode;
use crate::mm::rmap::PageRef;
use crate::vmstat::VmEvent;

/// A folio on a node's LRU, the access count of its process (or the time, ns) when its
/// accessed bits were last cleared, and its PG_referenced.
#[derive(Debug, Clone, Copy)]
pub struct LruEntry {
    pub page: PageRef,
    pub stamp: f64,
    pub referenced: bool,
}

/// Folios isolated and demoted at once (SWAP_CLUSTER_MAX), and what one direct reclaim asks.
pub const SWAP_CLUSTER_MAX: usize = 32;

/// Who reclaims (current_is_kswapd(), sc->reclaimer): kswapd, within its node's CPU credit, or
/// a task in direct reclaim on `cpu`, which pays the time itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reclaimer {
    Kswapd,
    Direct { cpu: usize },
}

/// What one `shrink_node` did: base pages demoted, a direct reclaimer's CPU time (ns), and
/// false when kswapd's credit ran out first.
pub(crate) struct Shrunk {
    pub demoted: u64,
    pub cpu_ns: f64,
    pub finished: bool,
}

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
        let active = v.pt.active(page.idx);
        let stamp = self.lru_stamp(page.mm, page.vma);
        // lruvec_add_folio: the list follows PG_active, which folio_migrate_flags copies to a
        // migrated folio's new copy
        let list = if active { &mut self.nodes[node].lru_active } else { &mut self.nodes[node].lru };
        list.push_back(LruEntry { page, stamp, referenced: false });
    }

    fn set_folio_active(&mut self, page: PageRef, on: bool) {
        if let Some(v) = self.mms.get_mut(page.mm).and_then(|m| m.vmas.get_mut(page.vma)) {
            v.pt.set_active(page.idx, on);
        }
    }

    /// The inactive list is too short against the active one: inactive x sqrt(10 x GiB of
    /// both) < active (1 under a GiB).
    // mm/vmscan.c: inactive_is_low
    fn inactive_is_low(&self, node: usize) -> bool {
        let (inactive, active) = (self.nodes[node].lru.len() as u64, self.nodes[node].lru_active.len() as u64);
        let gb = (inactive + active) >> 18;
        let ratio = if gb > 0 { (10 * gb).isqrt() } else { 1 };
        inactive * ratio < active
    }

    /// Move up to `nr` of the oldest active folios to the young end of the inactive list,
    /// their accessed bits cleared (folio_referenced is called, and an anonymous folio is
    /// deactivated whatever it says). Returns the folios looked at.
    // mm/vmscan.c: shrink_active_list
    fn shrink_active_list(&mut self, node: usize, nr: usize) -> u64 {
        let mut checked = 0;
        for _ in 0..nr {
            let Some(e) = self.nodes[node].lru_active.pop_front() else { break };
            checked += 1;
            if !self.lru_entry_valid(e.page, node) {
                continue;
            }
            let stamp = self.lru_stamp(e.page.mm, e.page.vma);
            self.set_folio_active(e.page, false);
            self.nodes[node].lru.push_back(LruEntry { stamp, ..e });
        }
        checked
    }

    /// The LRU walk kswapd and direct reclaim share: take folios from the old end of `node`'s
    /// LRU, rotate the referenced ones, and demote the others (`node` has a demotion target) in batches of
    /// SWAP_CLUSTER_MAX until `want` pages are demoted, a batch demotes nothing (nothing cold,
    /// or the lower tier is full: no swap to fall back on) or, for kswapd, its CPU credit runs
    /// out. kswapd pays each batch from its credit; a direct reclaimer's time is returned.
    // mm/vmscan.c: shrink_node -> shrink_lruvec -> shrink_inactive_list -> shrink_folio_list
    pub(crate) fn shrink_node(&mut self, node: usize, mut want: u64, running: &[bool], who: Reclaimer) -> Shrunk {
        let mut out = Shrunk { demoted: 0, cpu_ns: 0.0, finished: true };
        // every folio is looked at a few times at most: kept, activated, deactivated
        let mut budget = 2 * (self.nodes[node].lru.len() + self.nodes[node].lru_active.len());
        while want > 0 && budget > 0 {
            if who == Reclaimer::Kswapd && self.nodes[node].kswapd_credit_ns <= 0.0 {
                out.finished = false;
                return out;
            }
            let mut batch = Vec::new();
            let mut checked = 0u64;
            if self.inactive_is_low(node) {
                checked += self.shrink_active_list(node, SWAP_CLUSTER_MAX);
            }
            while batch.len() < SWAP_CLUSTER_MAX.min(want as usize) && budget > 0 {
                budget -= 1;
                checked += 1;
                let Some(e) = self.nodes[node].lru.pop_front() else { break };
                if !self.lru_entry_valid(e.page, node) {
                    continue;
                }
                // mm/vmscan.c: folio_check_references (PG_referenced tested and cleared)
                if self.folio_referenced(e, running) {
                    let stamp = self.lru_stamp(e.page.mm, e.page.vma);
                    let entry = LruEntry { stamp, referenced: true, ..e };
                    if e.referenced {
                        self.set_folio_active(e.page, true);
                        self.nodes[node].lru_active.push_back(entry); // FOLIOREF_ACTIVATE
                    } else {
                        self.nodes[node].lru.push_back(entry); // FOLIOREF_KEEP
                    }
                } else {
                    batch.push(e.page); // FOLIOREF_RECLAIM
                }
            }
            let mut cpu_ns = checked as f64 * self.cost.pte_update_ns;
            let demoted = if batch.is_empty() {
                0
            } else {
                let demoted = self.demote_folio_list(&batch, node, who, &mut cpu_ns);
                if demoted < batch.len() as u64 {
                    self.putback_undemoted(&batch, node);
                }
                demoted
            };
            match who {
                Reclaimer::Kswapd => {
                    let m = &mut self.nodes[node];
                    m.kswapd_credit_ns -= cpu_ns;
                    m.kswapd_cpu_ns += cpu_ns;
                }
                Reclaimer::Direct { .. } => out.cpu_ns += cpu_ns,
            }
            if demoted == 0 {
                break; // nothing cold, or the lower tier is full: no swap to fall back on
            }
            want = want.saturating_sub(demoted);
            out.demoted += demoted;
        }
        out
    }

    /// Direct reclaim by the allocating task on `cpu` (PF_MEMALLOC, its own time): demote from
    /// the nodes the allocation may use, nearest to `preferred` first, until SWAP_CLUSTER_MAX
    /// pages (sc->nr_to_reclaim) are reclaimed or every node was tried. Returns the pages
    /// reclaimed (did_some_progress) and adds the CPU time to `sys_ns`. A node reclaims only
    /// by demotion, so only with demotion_enabled and a demotion target (can_demote).
    // mm/vmscan.c: try_to_free_pages -> do_try_to_free_pages -> shrink_zones -> shrink_node
    pub fn try_to_free_pages(&mut self, preferred: usize, mask: crate::topology::NodeMask, cpu: usize, sys_ns: &mut f64) -> u64 {
        if !self.lru_tracking {
            return 0;
        }
        let running = self.running_mms();
        let mut reclaimed = 0;
        for i in 0..self.topo.nr_nodes {
            let n = self.topo.nodes_by_distance(preferred)[i];
            if mask & (1 << n) == 0 {
                continue;
            }
            // can_demote: the preferred target only (see demote_folio_list)
            if self.tiers.demotion[n].is_empty() {
                continue;
            }
            let out = self.shrink_node(n, SWAP_CLUSTER_MAX as u64 - reclaimed, &running, Reclaimer::Direct { cpu });
            *sys_ns += out.cpu_ns;
            reclaimed += out.demoted;
            if reclaimed >= SWAP_CLUSTER_MAX as u64 {
                break;
            }
        }
        reclaimed
    }

    /// Folios of a demotion batch still on `node` (their migration failed: the lower tier is
    /// full) go back to the LRU, activated: shrink_folio_list retries them without demotion,
    /// and an anonymous folio that cannot go to swap (none is modelled) is activated.
    // mm/vmscan.c: shrink_folio_list (demote_folios spliced back, retry; add_to_swap fails ->
    // activate_locked)
    fn putback_undemoted(&mut self, batch: &[PageRef], node: usize) {
        for &page in batch {
            if self.lru_entry_valid(page, node) {
                let stamp = self.lru_stamp(page.mm, page.vma);
                self.set_folio_active(page, true);
                self.nodes[node].lru_active.push_back(LruEntry { page, stamp, referenced: false });
            }
        }
    }

    /// Where a batch demoted from `node` goes: one of its preferred targets, at random when
    /// several are equally near (no draw when there is one).
    // mm/memory-tiers.c: next_demotion_node (node_random(&nd->preferred))
    pub fn next_demotion_node(&mut self, node: usize) -> Option<usize> {
        let n = self.tiers.demotion[node].len();
        match n {
            0 => None,
            1 => Some(self.tiers.demotion[node][0]),
            _ => Some(self.tiers.demotion[node][self.reclaim_rng.below(n as u64) as usize]),
        }
    }

    /// Pages direct reclaim could still free on `node` (the LRU where demotion can take it):
    /// what should_reclaim_retry adds to the free pages.
    // mm/vmscan.c: zone_reclaimable_pages (anon LRU counted when can_reclaim_anon_pages -> can_demote)
    pub fn zone_reclaimable_pages(&self, node: usize) -> u64 {
        if self.lru_tracking && !self.tiers.demotion[node].is_empty() {
            (self.nodes[node].lru.len() + self.nodes[node].lru_active.len()) as u64
        } else {
            0
        }
    }

    /// Why direct reclaim could not demote from `node` (the simulated OOM's message).
    pub fn why_no_demotion(&self, node: usize) -> String {
        if !self.cfg.tiering.demotion_enabled {
            return "demotion_enabled is false (and no swap is modelled)".into();
        }
        match self.tiers.demotion[node].first() {
            None => format!("node {node} has no demotion target"),
            Some(&t) if self.nodes[t].free() <= self.nodes[t].wmark_min => format!("node {node}'s demotion target, node {t}, is full"),
            Some(_) => format!("node {node} has no cold folio (every folio referenced since its last check)"),
        }
    }

    fn lru_entry_valid(&self, p: PageRef, node: usize) -> bool {
        let Some(m) = self.mms.get(p.mm).filter(|m| !m.exited) else { return false };
        let Some(v) = m.vmas.get(p.vma) else { return false };
        p.idx < v.pt.len() && v.pt.populated(p.idx) && v.pt.folio(p.idx).0 == p.idx && v.pt.nid(p.idx) as usize == node && v.shmem.is_none() && !v.pt.cow(p.idx)
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

    /// Migrate `pages` (on `node`) to the lower tier: next_demotion_node's target, no reclaim there
    /// (alloc_demote_folio's fallback to the rest of the lower tier is not modelled). kswapd
    /// runs on a CPU of its node, a direct reclaimer on its own. Returns the base pages demoted,
    /// counted as pgdemote_kswapd or pgdemote_direct.
    // mm/vmscan.c: demote_folio_list (MR_DEMOTION, MIGRATE_ASYNC), shrink_inactive_list
    // (PGDEMOTE_KSWAPD + reclaimer_offset())
    pub(crate) fn demote_folio_list(&mut self, pages: &[PageRef], node: usize, who: Reclaimer, cpu_ns: &mut f64) -> u64 {
        let Some(target) = self.next_demotion_node(node) else { return 0 };
        let (cpu, event) = match who {
            Reclaimer::Kswapd => (self.topo.node_cpus[node].first().copied().unwrap_or(0), VmEvent::PgdemoteKswapd),
            Reclaimer::Direct { cpu } => (cpu, VmEvent::PgdemoteDirect),
        };
        // 6.1+: the rest of the lower tiers, in the target's zonelist order (nearest first)
        let mut fallback: Vec<usize> = self.tiers.allowed[node].iter().copied().filter(|&n| n != target).collect();
        fallback.sort_by_key(|&n| (self.topo.node_distance(target, n), n));
        self.migrate_fallback = fallback;
        self.migrating_for_demotion = true;
        let out = self.migrate_pages(pages, target, cpu, MigrateMode::Async);
        self.migrating_for_demotion = false;
        self.migrate_fallback.clear();
        self.count(event, out.succeeded);
        *cpu_ns += out.cost;
        out.succeeded
    }
}

#[cfg(test)]
mod tests {
    use crate::kernel::Kernel;
    use crate::mm::rmap::PageRef;
    use crate::mm::types::{VM_READ, VM_WRITE};
    use crate::testutil::tiered_kernel;
    use crate::vmstat::VmEvent::PgdemoteDirect;

    /// The tiered kernel's memhog (asleep, holding 768 MiB of the 1 GiB DRAM node, MPOL_BIND to
    /// it) faults in a new VMA larger than the node's free memory, page by page through the
    /// fault path (access_page, charge_sys), with no kswapd run in between: kswapd is woken but
    /// never catches up. Returns the task, its mm and the pages faulted before an OOM, with the
    /// largest (system time of a fault that reclaimed - what the fault itself costs - its
    /// demotions' migrate_page_ns) seen.
    fn bound_fill(k: &mut Kernel) -> (usize, usize, u64, Option<f64>) {
        let t = k.tasks.iter().position(|t| t.comm == "memhog").expect("the memhog");
        let mm = k.tasks[t].mm;
        assert!(!k.tasks[t].runnable(), "the memhog sleeps once it holds its memory");
        let pages = k.nodes[0].free() + 8192;
        let vma = k.mms[mm].mmap_anon(pages, VM_READ | VM_WRITE);
        let fault = k.cost.fault_entry_exit_ns + k.cost.clear_page_ns;
        let mut budget = 1e18;
        let mut min_extra: Option<f64> = None;
        for idx in 0..pages {
            let (sys, direct) = (k.tasks[t].sys_ns, k.vmstat.get(PgdemoteDirect));
            if !k.access_page(t, vma, idx, true, &mut budget) {
                return (t, mm, idx, min_extra);
            }
            let demoted = k.vmstat.get(PgdemoteDirect) - direct;
            if demoted > 0 {
                let extra = k.tasks[t].sys_ns - sys - fault - demoted as f64 * k.cost.migrate_page_ns;
                min_extra = Some(min_extra.map_or(extra, |m| m.min(extra)));
            }
        }
        (t, mm, pages, min_extra)
    }

    /// mm/page_alloc.c: __alloc_pages_slowpath -> __alloc_pages_direct_reclaim ->
    /// __perform_reclaim -> try_to_free_pages (mm/vmscan.c: do_try_to_free_pages -> shrink_zones
    /// -> shrink_node -> shrink_folio_list -> demote_folio_list) — an allocation bound to a
    /// full DRAM node, with demotion enabled, succeeds: the faulting task demotes cold folios
    /// to the lower tier itself (pgdemote_direct, at least SWAP_CLUSTER_MAX per reclaim), the
    /// time is its system time, and every page is still accounted for (invariants).
    #[test]
    fn direct_reclaim_demotes_for_an_allocation_bound_to_a_full_node() {
        let mut k = tiered_kernel("demotion_enabled = true", 2);
        let (kswapd, used1) = (k.vmstat.get(crate::vmstat::VmEvent::PgdemoteKswapd), k.nodes[1].used);
        let pages = k.nodes[0].free() + 8192;
        let held: u64 = k.mms.iter().map(|m| m.node_pages[0] + m.node_pages[1]).sum();
        let (_, _, done, min_extra) = bound_fill(&mut k);
        assert_eq!(done, pages, "every fault succeeds: {:?}", k.oom);
        assert!(k.oom.is_none());
        let direct = k.vmstat.get(PgdemoteDirect);
        assert!(direct >= 8192, "the pages past the node's free memory were demoted: {direct}");
        assert_eq!(k.vmstat.get(crate::vmstat::VmEvent::PgdemoteKswapd), kswapd, "kswapd never ran");
        assert_eq!(k.nodes[1].used, used1 + direct, "demoted pages land on the lower tier");
        assert!(k.nodes[0].free() >= k.nodes[0].wmark_min, "the node stays above min");
        // the reclaim's CPU time (access-bit tests, TLB flush) is the faulting task's, beyond the copies
        assert!(min_extra.is_some_and(|e| e > 0.0), "a reclaiming fault costs its task more than the fault and the copies: {min_extra:?}");
        crate::invariants::check_counters(&k).expect("pages conserved, numastat sums");
        for m in 0..k.mms.len() {
            crate::invariants::check_mm(&k, m).expect("page tables agree with the counters");
        }
        assert_eq!(k.mms.iter().map(|m| m.node_pages[0] + m.node_pages[1]).sum::<u64>(), held + pages);
    }

    /// mm/page_alloc.c: should_reclaim_retry -> __alloc_pages_may_oom — reclaim that cannot
    /// demote makes no progress, and the allocation ends in the simulated OOM, whose message
    /// says why: demotion disabled, or the lower tier full (MAX_RECLAIM_RETRIES passes).
    #[test]
    fn direct_reclaim_that_cannot_demote_ends_in_the_oom() {
        let mut k = tiered_kernel("demotion_enabled = false", 2);
        let pages = k.nodes[0].free() + 8192;
        let (_, _, done, _) = bound_fill(&mut k);
        assert!(done < pages, "the fill stops at the node's min watermark");
        let oom = k.oom.clone().expect("the simulated OOM");
        assert!(oom.contains("node 0 (1.00 GiB) is full") && oom.contains("direct reclaim could not demote: demotion_enabled is false"), "{oom}");
        assert_eq!(k.vmstat.get(PgdemoteDirect), 0);

        let mut k = tiered_kernel("demotion_enabled = true", 2);
        let filler = k.nodes[1].free() - k.nodes[1].wmark_min;
        k.nodes[1].used += filler; // the lower tier full
        bound_fill(&mut k);
        let oom = k.oom.clone().expect("the simulated OOM");
        assert!(oom.contains("node 0's demotion target, node 1, is full"), "{oom}");
        assert_eq!(k.vmstat.get(PgdemoteDirect), 0);
        k.nodes[1].used -= filler;
        crate::invariants::check_counters(&k).expect("pages conserved");
    }

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

    /// mm/vmscan.c: folio_check_references + shrink_active_list — on the inactive list a folio
    /// referenced once is kept (PG_referenced), referenced again activated; when the inactive
    /// list is low, the oldest active folios are deactivated with their accessed bits cleared
    /// and, unreferenced since, demoted (an anonymous folio is never kept active).
    #[test]
    fn referenced_twice_activates_and_deactivated_cold_folios_are_demoted() {
        use super::Reclaimer;
        let mut k = tiered_kernel("demotion_enabled = true", 2);
        let valid = |k: &Kernel, l: &std::collections::VecDeque<super::LruEntry>| l.iter().filter(|e| k.lru_entry_valid(e.page, 0)).count();
        let folios = valid(&k, &k.nodes[0].lru);
        assert!(folios > 1000 && k.nodes[0].lru_active.is_empty(), "new anonymous folios join the inactive list");
        let hot = vec![true; k.mms.len()];
        let out = k.shrink_node(0, 32, &hot, Reclaimer::Direct { cpu: 0 });
        assert_eq!(out.demoted, 0, "every folio referenced: nothing demoted");
        assert_eq!((valid(&k, &k.nodes[0].lru), valid(&k, &k.nodes[0].lru_active)), (0, folios), "kept once, then activated");
        assert!(k.nodes[0].lru_active.iter().all(|e| e.referenced));
        let cold = vec![false; k.mms.len()];
        let out = k.shrink_node(0, 64, &cold, Reclaimer::Direct { cpu: 0 });
        assert_eq!(out.demoted, 64, "two clusters deactivated, then demoted");
        assert_eq!(valid(&k, &k.nodes[0].lru_active), folios - 64);
        assert_eq!(k.vmstat.get(PgdemoteDirect), 64);
    }

    /// mm/vmscan.c: inactive_is_low — inactive x int_sqrt(10 x GiB of both lists) < active.
    #[test]
    fn inactive_is_low_follows_the_size_ratio() {
        let mut k = tiered_kernel("demotion_enabled = true", 2);
        let e = *k.nodes[0].lru.front().expect("an LRU entry");
        let set = |k: &mut Kernel, inactive: usize, active: usize| {
            k.nodes[0].lru = std::iter::repeat_n(e, inactive).collect();
            k.nodes[0].lru_active = std::iter::repeat_n(e, active).collect();
        };
        set(&mut k, 100, 100); // under a GiB: ratio 1
        assert!(!k.inactive_is_low(0));
        set(&mut k, 100, 101);
        assert!(k.inactive_is_low(0));
        set(&mut k, 150_000, 898_576); // 4 GiB: ratio int_sqrt(40) = 6, 900,000 < 898,576 is false
        assert!(!k.inactive_is_low(0));
        set(&mut k, 140_000, 908_576); // 840,000 < 908,576
        assert!(k.inactive_is_low(0));
    }

    /// mm/memory-tiers.c: next_demotion_node — several equally near targets share a node's
    /// demotions at random (node_random); one target takes them all without a random draw.
    #[test]
    fn equally_near_targets_share_demotions() {
        let mut k = tiered_kernel("demotion_enabled = true", 2);
        let before = k.reclaim_rng.clone();
        assert_eq!(k.next_demotion_node(0), Some(1));
        assert_eq!(k.reclaim_rng.clone().next_u64(), before.clone().next_u64(), "no draw for one target");
        k.tiers.demotion[0] = vec![1, 2];
        let picks: Vec<usize> = (0..200).filter_map(|_| k.next_demotion_node(0)).collect();
        let ones = picks.iter().filter(|&&p| p == 1).count();
        assert!(picks.iter().all(|&p| p == 1 || p == 2) && (60..=140).contains(&ones), "{ones} of 200 to node 1");
        assert_eq!(k.next_demotion_node(1), None, "the lower tier demotes nowhere");
    }

    /// mm/vmscan.c: shrink_folio_list — folios whose demotion failed (the lower tier is full)
    /// are not lost from the LRU: without swap they are activated.
    #[test]
    fn undemoted_folios_go_back_to_the_lru_activated() {
        use super::Reclaimer;
        let mut k = tiered_kernel("demotion_enabled = true", 2);
        let valid = |k: &Kernel| k.nodes[0].lru.iter().chain(&k.nodes[0].lru_active).filter(|e| k.lru_entry_valid(e.page, 0)).count();
        let before = valid(&k);
        k.nodes[1].used = k.nodes[1].present; // the lower tier full
        let cold = vec![false; k.mms.len()];
        let out = k.shrink_node(0, 32, &cold, Reclaimer::Direct { cpu: 0 });
        assert_eq!(out.demoted, 0);
        assert_eq!(valid(&k), before, "every isolated folio is back on the LRU");
        assert_eq!(k.nodes[0].lru_active.len(), 32, "activated");
    }

    /// mm/vmscan.c: demote_folio_list -> alloc_demote_folio — from 6.1 (32008027) a folio whose
    /// preferred target is full goes to another node of the lower tiers (the target's zonelist
    /// order); 5.15-6.0 allocate on the target only.
    #[test]
    fn demotion_falls_back_to_the_rest_of_the_lower_tier_from_6_1() {
        use super::Reclaimer;
        for (version, moved) in [("6.1", 32), ("5.19", 0)] {
            let text = crate::testutil::tiered("demotion_enabled = true", 2)
                .replace("version = \"6.12\"", &format!("version = \"{version}\""))
                .replace("nodes = 2", "nodes = 3")
                .replace("memory_gib_per_node = [1, 2]", "memory_gib_per_node = [1, 2, 2]")
                .replace("cpus_per_node = [2, 0]", "cpus_per_node = [2, 0, 0]")
                .replace("[\"dram\", \"kmem\"]", "[\"dram\", \"kmem\", \"kmem\"]")
                .replace("distances = [[10, 21], [21, 10]]", "distances = [[10, 21, 31], [21, 10, 31], [31, 31, 10]]")
                .replace("stream_gibps = [[2.0, 1.4], [1.4, 2.0]]", "stream_gibps = [[2.0, 1.4, 1.0], [1.4, 2.0, 1.0], [1.0, 1.0, 2.0]]")
                .replace("touch_gibps = [[2.0, 1.4], [1.4, 2.0]]", "touch_gibps = [[2.0, 1.4, 1.0], [1.4, 2.0, 1.0], [1.0, 1.0, 2.0]]")
                .replace("page_store_gibps = [[2.0, 1.4], [1.4, 2.0]]", "page_store_gibps = [[2.0, 1.4, 1.0], [1.4, 2.0, 1.0], [1.0, 1.0, 2.0]]")
                .replace("latency_ns = [[100.0, 180.0], [180.0, 100.0]]", "latency_ns = [[100.0, 180.0, 250.0], [180.0, 100.0, 250.0], [250.0, 250.0, 100.0]]")
                .replace("node_bandwidth_gibps = [100.0, 100.0]", "node_bandwidth_gibps = [100.0, 100.0, 100.0]");
            let mut sim = crate::simulation::Simulation::new(&crate::scenario::parse_scenario(&text).expect("parses")).expect("builds");
            while sim.k.nodes[0].used < 768 * 256 {
                assert!(sim.step().expect("steps"));
            }
            let mut k = sim.k;
            assert_eq!(k.next_demotion_node(0), Some(1), "{version}: node 1 is the nearer target");
            k.nodes[1].used = k.nodes[1].present; // the preferred target full
            let cold = vec![false; k.mms.len()];
            let before = k.nodes[2].used;
            let out = k.shrink_node(0, 32, &cold, Reclaimer::Direct { cpu: 0 });
            assert_eq!((out.demoted, k.nodes[2].used - before), (moved, moved), "{version}");
        }
    }

    /// mm/migrate.c: folio_migrate_flags copies PG_active; lruvec_add_folio puts the new
    /// folio on the list it names: an active folio that migrates stays active on its new node.
    #[test]
    fn a_migrated_folio_keeps_its_lru_list() {
        use crate::mm::migrate::MigrateMode;
        let mut k = tiered_kernel("demotion_enabled = true", 2);
        let pages: Vec<PageRef> = k.nodes[0].lru.iter().filter(|e| k.lru_entry_valid(e.page, 0)).map(|e| e.page).take(2).collect();
        k.set_folio_active(pages[0], true);
        k.migrate_pages(&pages, 1, 0, MigrateMode::Async);
        k.lru_add_drain_all();
        let on = |l: &std::collections::VecDeque<super::LruEntry>, p: PageRef| l.iter().any(|e| e.page == p);
        assert!(on(&k.nodes[1].lru_active, pages[0]) && !on(&k.nodes[1].lru, pages[0]), "the active one stays active");
        assert!(on(&k.nodes[1].lru, pages[1]) && !on(&k.nodes[1].lru_active, pages[1]), "the inactive one stays inactive");
    }
}

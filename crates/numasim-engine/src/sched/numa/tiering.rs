//! Promotion from a slow memory tier on hint faults (kernel/sched/fair.c, memory tiering
//! mode; tiering.md §3.3-3.7): the scan time kept in a slow-tier folio's last_cpupid, the
//! hint-fault latency against the hot threshold, the promotion candidate rate limit and the
//! threshold's automatic adjustment (all 6.1), and the free-space bypass.

use crate::features::Feature;
use crate::kernel::Kernel;
use crate::mm::pgtable::CPUPID_UNSET;
use crate::variants::NumaTiering;
use crate::vmstat::VmEvent;

/// The access time field: last_cpupid's bits (LAST_CPUPID_SHIFT = 8 + NR_CPUS_BITS; Debian's
/// NR_CPUS = 8192 gives 21, recalled), in ms, PAGE_ACCESS_TIME_BUCKETS = 0.
// include/linux/mm.h: PAGE_ACCESS_TIME_MASK
pub const PAGE_ACCESS_TIME_MASK: u32 = (1 << 21) - 1;

/// Threshold adjustment steps per reference threshold (NUMA_MIGRATION_ADJUST_STEPS).
const ADJUST_STEPS: u64 = 16;

impl Kernel {
    /// jiffies_to_msecs(jiffies): the tick's start, ms.
    #[inline]
    fn now_ms(&self) -> u64 {
        self.now / 1_000_000
    }

    /// The folio's last_cpupid holds its scan time: tiering mode with hot page selection
    /// (6.1+) and a page outside the top tier.
    // include/linux/mm.h: folio_use_access_time
    #[inline]
    pub fn folio_use_access_time(&self, nid: usize) -> bool {
        self.tiering_mode() && !self.node_is_toptier(nid) && self.feature(Feature::NumaTieringHotThreshold)
    }

    /// The scanner stamps a slow-tier folio it makes PROT_NONE with the scan time.
    // mm/mprotect.c: change_pte_range (folio_xchg_access_time)
    pub fn stamp_access_time(&mut self, mm: usize, vma: usize, head: u64) {
        let now = (self.now_ms() as u32) & PAGE_ACCESS_TIME_MASK;
        self.mms[mm].vmas[vma].pt.set_last_cpupid(head, now);
    }

    /// ms between the scan that protected the folio and this fault; the fault's time becomes
    /// the new stamp. An unstamped folio (all ones) gives an arbitrary latency, as in the kernel.
    // kernel/sched/fair.c: numa_hint_fault_latency
    fn numa_hint_fault_latency(&mut self, mm: usize, vma: usize, head: u64) -> u64 {
        let now = (self.now_ms() as u32) & PAGE_ACCESS_TIME_MASK;
        let slot = &mut self.mms[mm].vmas[vma].pt.pages[head as usize].last_cpupid;
        let last = std::mem::replace(slot, now) & PAGE_ACCESS_TIME_MASK;
        (now.wrapping_sub(last) & PAGE_ACCESS_TIME_MASK) as u64
    }

    /// The target node has free pages above its promo watermark plus max(1 GiB, 1/16 of it).
    // kernel/sched/fair.c: pgdat_free_space_enough
    pub fn pgdat_free_space_enough(&self, node: usize) -> bool {
        let m = &self.nodes[node];
        let enough = (1u64 << (30 - 12)).max(m.present / 16);
        m.free() > m.wmark_promo + enough
    }

    /// Count the fault's pages as promotion candidates of `node`; true when the node's
    /// candidates in the current 1 s window reached the rate limit (pages).
    // kernel/sched/fair.c: numa_promotion_rate_limit
    fn numa_promotion_rate_limit(&mut self, node: usize, rate_limit: u64, nr: u64) -> bool {
        let now = self.now_ms();
        self.count(VmEvent::PgpromoteCandidate, nr);
        let m = &mut self.nodes[node];
        m.pgpromote_candidate += nr;
        if now.saturating_sub(m.nbp_rl_start) > 1000 {
            m.nbp_rl_start = now;
            m.nbp_rl_nr_cand = m.pgpromote_candidate;
        }
        m.pgpromote_candidate - m.nbp_rl_nr_cand >= rate_limit
    }

    /// Every scan_period_max: candidates above 110% of what the rate limit allows in the
    /// period lower the threshold by ref_th/8, below 90% raise it, within [ref_th/8, 2 ref_th].
    // kernel/sched/fair.c: numa_promotion_adjust_threshold (c959924b0dc5)
    fn numa_promotion_adjust_threshold(&mut self, node: usize, rate_limit: u64, ref_th: u64) {
        let now = self.now_ms();
        let period = self.cfg.sysctl.numa_balancing_scan_period_max_ms as u64;
        let m = &mut self.nodes[node];
        if now.saturating_sub(m.nbp_th_start) <= period {
            return;
        }
        m.nbp_th_start = now;
        let ref_cand = rate_limit * period / 1000;
        let diff_cand = m.pgpromote_candidate - m.nbp_th_nr_cand;
        let unit_th = ref_th * 2 / ADJUST_STEPS;
        let mut th = if m.nbp_threshold != 0 { m.nbp_threshold } else { ref_th };
        if diff_cand > ref_cand * 11 / 10 {
            th = th.saturating_sub(unit_th).max(unit_th);
        } else if diff_cand < ref_cand * 9 / 10 {
            th = (th + unit_th).min(ref_th * 2);
        }
        m.nbp_th_nr_cand = m.pgpromote_candidate;
        m.nbp_threshold = th;
    }

    /// Whether a hint fault on a slow-tier folio should promote it to `dst` (the faulting
    /// CPU's node): hot (scan-to-fault latency below the threshold) and within the rate
    /// limit, or the target has free space enough.
    // kernel/sched/fair.c: should_numa_migrate_memory (the folio_use_access_time branch)
    pub fn should_promote(&mut self, mm: usize, vma: usize, head: u64, nr: u64, dst: usize) -> bool {
        let (rate_limited, auto) = (self.feature(Feature::NumaTieringRateLimit), self.feature(Feature::NumaTieringAutoThreshold));
        if self.pgdat_free_space_enough(dst) {
            if auto {
                // "workload changed, reset hot threshold"
                self.nodes[dst].nbp_threshold = 0;
            }
            if self.variants().numa_tiering >= NumaTiering::V6_18 {
                self.count(VmEvent::PgpromoteCandidateNrl, nr);
            }
            return true;
        }
        let def_th = self.cfg.tiering.hot_threshold_ms as u64;
        let rate_limit = self.cfg.tiering.promote_rate_limit_mbps << (20 - 12);
        if auto {
            self.numa_promotion_adjust_threshold(dst, rate_limit, def_th);
        }
        let th = match self.nodes[dst].nbp_threshold {
            0 => def_th,
            th => th,
        };
        let latency = self.numa_hint_fault_latency(mm, vma, head);
        if latency >= th {
            return false;
        }
        !rate_limited || !self.numa_promotion_rate_limit(dst, rate_limit, nr)
    }

    /// A folio that crossed between the top tier and a lower one starts with no access time.
    // mm/migrate.c: folio_migrate_flags (tiering mode)
    pub fn reset_cpupid_across_tiers(&mut self, mm: usize, vma: usize, head: u64, src: usize, dst: usize) {
        if self.tiering_mode() && self.node_is_toptier(src) != self.node_is_toptier(dst) {
            self.mms[mm].vmas[vma].pt.set_last_cpupid(head, CPUPID_UNSET);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::tiered_kernel;
    use crate::vmstat::VmEvent::*;

    /// kernel/sched/fair.c: pgdat_free_space_enough — free above promo + max(1 GiB, 1/16):
    /// a 1 GiB node never has it; promotion then needs the hot threshold.
    #[test]
    fn free_space_enough_needs_a_gibibyte_above_promo() {
        let k = tiered_kernel("", 2);
        assert!(!k.pgdat_free_space_enough(0), "a 1 GiB node never has 1 GiB free above promo");
        assert!(k.pgdat_free_space_enough(1) == (k.nodes[1].free() > k.nodes[1].wmark_promo + (1 << 18)));
    }

    /// kernel/sched/fair.c: numa_hint_fault_latency + should_numa_migrate_memory — a fault
    /// within hot_threshold_ms of the scan promotes, a later one does not; the fault re-stamps.
    #[test]
    fn latency_below_the_hot_threshold_promotes() {
        let mut k = tiered_kernel("numa_balancing_hot_threshold_ms = 1000", 2);
        k.now = 10_000_000_000;
        k.stamp_access_time(0, 0, 0);
        k.now += 999_000_000;
        assert!(k.should_promote(0, 0, 0, 1, 0), "999 ms: hot");
        k.stamp_access_time(0, 0, 0);
        k.now += 1_000_000_000;
        assert!(!k.should_promote(0, 0, 0, 1, 0), "1000 ms: not hot");
        assert_eq!(k.vmstat.get(PgpromoteCandidate), 1, "only the hot fault is a candidate");
        k.now += 10_000_000;
        assert!(k.should_promote(0, 0, 0, 1, 0), "10 ms after the last fault's stamp");
    }

    /// kernel/sched/fair.c: numa_promotion_rate_limit — candidates beyond rate_limit pages in
    /// a 1 s window are refused (still counted in pgpromote_candidate); a new window resets.
    #[test]
    fn rate_limit_caps_candidates_per_second() {
        let mut k = tiered_kernel("numa_balancing_promote_rate_limit_MBps = 1", 2);
        k.now = 5_000_000_000;
        let ok = (0..300).filter(|_| !k.numa_promotion_rate_limit(0, 256, 1)).count();
        // the snapshot is taken after the opening candidate is counted: it is free, and 256 pass
        assert_eq!(ok, 256, "1 MB/s = 256 pages a window");
        assert_eq!(k.vmstat.get(PgpromoteCandidate), 300);
        k.now += 1_001_000_000;
        assert!(!k.numa_promotion_rate_limit(0, 256, 1), "a new window");
    }

    /// kernel/sched/fair.c: numa_promotion_adjust_threshold — too few candidates in a
    /// scan_period_max raise the threshold by ref/8 up to 2 x ref; too many lower it to ref/8.
    #[test]
    fn threshold_adjusts_toward_the_rate_limit() {
        let mut k = tiered_kernel("", 2);
        for i in 1..=10 {
            k.now = i * 61_000_000_000;
            k.numa_promotion_adjust_threshold(0, 1000, 1000);
        }
        assert_eq!(k.nodes[0].nbp_threshold, 2000, "no candidates: up to 2 x 1000 ms");
        for i in 11..=30 {
            k.now = i * 61_000_000_000;
            k.nodes[0].pgpromote_candidate += 1_000_000;
            k.numa_promotion_adjust_threshold(0, 1000, 1000);
        }
        assert_eq!(k.nodes[0].nbp_threshold, 125, "far over 60 s x 1000 pages/s: down to 1000/8");
    }
}

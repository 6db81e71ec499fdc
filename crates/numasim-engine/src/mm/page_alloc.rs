//! Per-node free pages, watermarks and the page allocator's node choice (mm/page_alloc.c).

use crate::kernel::Kernel;
use crate::mm::mempolicy::Mempolicy;
use crate::topology::Topology;
use crate::vmstat::VmEvent;

/// One node's memory (struct pglist_data, a single ZONE_NORMAL).
#[derive(Debug, Clone)]
pub struct NodeMem {
    pub present: u64,
    pub used: u64,
    pub wmark_min: u64,
    pub wmark_low: u64,
    pub wmark_high: u64,
    /// WMARK_PROMO (5.18): where kswapd stops in tiering mode.
    pub wmark_promo: u64,
    /// Hot page selection state (6.1, struct pglist_data nbp_*): rate-limit window start (ms)
    /// and candidates then, threshold (ms, 0 = the default), its period start and candidates.
    pub nbp_rl_start: u64,
    pub nbp_rl_nr_cand: u64,
    pub nbp_threshold: u64,
    pub nbp_th_start: u64,
    pub nbp_th_nr_cand: u64,
    /// This node's PGPROMOTE_CANDIDATE (node vmstat).
    pub pgpromote_candidate: u64,
    /// kswapd is awake (woken by wakeup_kswapd, asleep again once the node is balanced).
    pub kswapd_wake: bool,
    /// CPU time (ns) kswapd may still use in this tick, and all it used (mm/vmscan.rs).
    pub kswapd_credit_ns: f64,
    pub kswapd_cpu_ns: f64,
    /// The node's LRU, oldest first, kept only where reclaim can demote (mm/vmscan.rs).
    pub lru: std::collections::VecDeque<crate::mm::vmscan::LruEntry>,
    /// The active list, oldest first (mm/vmscan.rs); `lru` is the inactive one.
    pub lru_active: std::collections::VecDeque<crate::mm::vmscan::LruEntry>,
    /// numabalancing_migrate_next_window (ns) and _nr_pages (3.8-4.18 rate limit).
    pub migrate_next_window: u64,
    pub migrate_nr_pages: u64,
    /// /sys/devices/system/node/nodeN/numastat, indexed by [`NumaStat`].
    pub numastat: [u64; NR_NUMA_STAT],
}

/// The per-node allocation counters (include/linux/vmstat.h: enum numa_stat_item), under
/// their names in /sys/devices/system/node/nodeN/numastat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumaStat {
    Hit,
    Miss,
    Foreign,
    InterleaveHit,
    LocalNode,
    OtherNode,
}

pub const NR_NUMA_STAT: usize = 6;
pub const NUMA_STAT_NAMES: [&str; NR_NUMA_STAT] = ["numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node"];

impl NodeMem {
    // mm/page_alloc.c: calculate_min_free_kbytes + __setup_per_zone_wmarks
    pub fn for_topology(t: &Topology, watermark_scale_factor: u64) -> Vec<NodeMem> {
        let total: u64 = t.node_pages.iter().sum();
        let min_free_kbytes = ((4.0 * ((total * 4) as f64).sqrt()) as u64).clamp(128, 262144);
        let min_free_pages = min_free_kbytes / 4;
        t.node_pages
            .iter()
            .map(|&present| {
                let min = min_free_pages * present / total.max(1);
                let delta = (min / 4).max(present * watermark_scale_factor / 10000);
                NodeMem {
                    present,
                    used: 0,
                    wmark_min: min,
                    wmark_low: min + delta,
                    wmark_high: min + 2 * delta,
                    wmark_promo: min + 3 * delta,
                    nbp_rl_start: 0,
                    nbp_rl_nr_cand: 0,
                    nbp_threshold: 0,
                    nbp_th_start: 0,
                    nbp_th_nr_cand: 0,
                    pgpromote_candidate: 0,
                    kswapd_wake: false,
                    kswapd_credit_ns: 0.0,
                    kswapd_cpu_ns: 0.0,
                    lru: Default::default(),
                    lru_active: Default::default(),
                    migrate_next_window: 0,
                    migrate_nr_pages: 0,
                    numastat: [0; NR_NUMA_STAT],
                }
            })
            .collect()
    }

    pub fn free(&self) -> u64 {
        self.present - self.used
    }
}

/// Retries of direct reclaim that made no progress before the OOM path (MAX_RECLAIM_RETRIES).
const MAX_RECLAIM_RETRIES: u32 = 16;

impl Kernel {
    /// Allocate one page for a fault by a task on `cpu` under `pol` (GFP_HIGHUSER_MOVABLE: it
    /// may reclaim directly, and the time it spends doing so is added to `sys_ns`, the fault's
    /// system time); returns its node.
    pub fn alloc_page(&mut self, pol: &Mempolicy, cpu: usize, sys_ns: &mut f64) -> Option<usize> {
        self.alloc_pages_gfp(pol, cpu, 0, Some(sys_ns))
    }

    /// Allocate 2^order contiguous pages for a fault by a task on `cpu` under `pol`; returns
    /// the node. A large order also needs a free block, which fragmentation may deny per node.
    /// No direct reclaim: a large folio's fault allocation is GFP_TRANSHUGE_LIGHT (THP defrag
    /// "madvise", the default) and falls back to a smaller order instead.
    pub fn alloc_pages(&mut self, pol: &Mempolicy, cpu: usize, order: u8) -> Option<usize> {
        self.alloc_pages_gfp(pol, cpu, order, None)
    }

    /// The allocator: `direct_reclaim` (the caller's system time) when the allocation may
    /// reclaim (__GFP_DIRECT_RECLAIM).
    // mm/page_alloc.c: __alloc_pages (fast path at the low watermark, then min), zonelist by distance
    fn alloc_pages_gfp(&mut self, pol: &Mempolicy, cpu: usize, order: u8, direct_reclaim: Option<&mut f64>) -> Option<usize> {
        let this = self.cpu_node(cpu);
        let nr = 1u64 << order;
        let (preferred, mask) = pol.alloc_nodes(this, self.topo.nr_nodes);
        let mut node = self.get_page_from_freelist(preferred, mask, order, |m| m.wmark_low);
        if node.is_none() {
            // __alloc_pages_slowpath: wake_all_kswapds before the min watermark
            self.wake_all_kswapds(preferred, mask);
            node = self.get_page_from_freelist(preferred, mask, order, |m| m.wmark_min);
        }
        if node.is_none() {
            if let Some(sys_ns) = direct_reclaim {
                node = self.alloc_pages_direct_reclaim(preferred, mask, cpu, order, sys_ns);
            }
        }
        let node = node?;
        self.nodes[node].used += nr;
        self.zone_statistics(preferred, node, this, 1);
        self.count(VmEvent::Pgalloc, nr);
        Some(node)
    }

    /// The first node of the zonelist (by distance from `preferred`, within `mask`) whose free
    /// pages stay at or above `wmark` after the allocation.
    // mm/page_alloc.c: get_page_from_freelist (zone_watermark_fast)
    fn get_page_from_freelist(&mut self, preferred: usize, mask: crate::topology::NodeMask, order: u8, wmark: fn(&NodeMem) -> u64) -> Option<usize> {
        let nr = 1u64 << order;
        for i in 0..self.topo.nr_nodes {
            let n = self.topo.nodes_by_distance(preferred)[i];
            if mask & (1 << n) == 0 {
                continue;
            }
            if self.nodes[n].free() >= wmark(&self.nodes[n]) + nr && !self.high_order_fails(order) {
                return Some(n);
            }
        }
        None
    }

    /// Every allowed node is below its min watermark: the allocating task reclaims itself
    /// (demotion, mm/vmscan.rs) and retries at the min watermark, while reclaim makes progress,
    /// or up to MAX_RECLAIM_RETRIES times without, while the reclaimable and free pages of
    /// some node would pass it. None goes to the OOM path.
    // mm/page_alloc.c: __alloc_pages_slowpath -> __alloc_pages_direct_reclaim (__perform_reclaim,
    // then get_page_from_freelist), should_reclaim_retry
    fn alloc_pages_direct_reclaim(&mut self, preferred: usize, mask: crate::topology::NodeMask, cpu: usize, order: u8, sys_ns: &mut f64) -> Option<usize> {
        let nr = 1u64 << order;
        let mut no_progress_loops = 0;
        loop {
            // mm/page_alloc.c: __perform_reclaim -> try_to_free_pages
            let progress = self.try_to_free_pages(preferred, mask, cpu, sys_ns);
            if let Some(n) = self.get_page_from_freelist(preferred, mask, order, |m| m.wmark_min) {
                return Some(n);
            }
            // mm/page_alloc.c: should_reclaim_retry
            if progress > 0 {
                no_progress_loops = 0;
            } else {
                no_progress_loops += 1;
            }
            if no_progress_loops > MAX_RECLAIM_RETRIES {
                return None;
            }
            let retry = (0..self.topo.nr_nodes).any(|n| mask & (1 << n) != 0 && self.nodes[n].free() + self.zone_reclaimable_pages(n) >= self.nodes[n].wmark_min + nr);
            if !retry {
                return None;
            }
        }
    }

    /// Allocate on exactly `node` without reclaim (__GFP_THISNODE | __GFP_NORETRY), e.g. a migration target.
    pub fn alloc_page_thisnode(&mut self, node: usize, cpu: usize) -> bool {
        self.alloc_pages_thisnode(node, cpu, 0)
    }

    /// 2^order pages on exactly `node`, no reclaim or compaction (GFP_TRANSHUGE_LIGHT for a large folio).
    // mm/migrate.c: alloc_misplaced_dst_folio / alloc_migration_target
    pub fn alloc_pages_thisnode(&mut self, node: usize, cpu: usize, order: u8) -> bool {
        self.alloc_pages_fallback(node, node, cpu, order)
    }

    /// 2^order pages on `node` for an allocation that preferred `preferred` (a fallback of
    /// the preferred node's zonelist: numa_miss here, numa_foreign there), no reclaim.
    pub fn alloc_pages_fallback(&mut self, preferred: usize, node: usize, cpu: usize, order: u8) -> bool {
        let nr = 1u64 << order;
        if self.nodes[node].free() < self.nodes[node].wmark_min + nr || self.high_order_fails(order) {
            return false;
        }
        self.nodes[node].used += nr;
        self.zone_statistics(preferred, node, self.cpu_node(cpu), 1);
        self.count(VmEvent::Pgalloc, nr);
        true
    }

    pub fn free_page(&mut self, node: usize) {
        self.nodes[node].used -= 1;
        self.count(VmEvent::Pgfree, 1);
    }

    // mm/page_alloc.c: zone_statistics: the node's counters and the sums of /proc/vmstat;
    // numa_foreign counts on the preferred node. rmqueue passes nr_account = 1 whatever the
    // order (3.19's buffered_rmqueue counted one too): a THP or mTHP allocation is one
    // numa_hit, while pgalloc_* count its pages. Only the order-0 bulk allocator passes more.
    fn zone_statistics(&mut self, preferred: usize, node: usize, this: usize, nr: u64) {
        if node == preferred {
            self.count(VmEvent::NumaHit, nr);
            self.nodes[node].numastat[NumaStat::Hit as usize] += nr;
        } else {
            self.count(VmEvent::NumaMiss, nr);
            self.count(VmEvent::NumaForeign, nr);
            self.nodes[node].numastat[NumaStat::Miss as usize] += nr;
            self.nodes[preferred].numastat[NumaStat::Foreign as usize] += nr;
        }
        let (event, stat) = if node == this { (VmEvent::NumaLocal, NumaStat::LocalNode) } else { (VmEvent::NumaOther, NumaStat::OtherNode) };
        self.count(event, nr);
        self.nodes[node].numastat[stat as usize] += nr;
    }

    /// migrate_balanced_pgdat: the target keeps free > high watermark + nr after the move.
    // mm/migrate.c: migrate_balanced_pgdat
    pub fn migrate_balanced_pgdat(&self, node: usize, nr: u64) -> bool {
        let m = &self.nodes[node];
        m.free() > m.wmark_high + nr
    }
}

#[cfg(test)]
mod tests {
    use crate::mm::mempolicy::Mempolicy;
    use crate::testutil::small_kernel;
    use crate::vmstat::VmEvent::*;

    /// mm/page_alloc.c: get_page_from_freelist — the local node first; below its low watermark
    /// the zonelist falls back to the next node by distance (numa_miss / numa_other).
    #[test]
    fn default_policy_falls_back_to_the_next_node() {
        let mut k = small_kernel("");
        let before = (k.vmstat.get(NumaHit), k.vmstat.get(NumaMiss));
        assert_eq!(k.alloc_page(&Mempolicy::DEFAULT, 0, &mut 0.0), Some(0));
        k.nodes[0].used = k.nodes[0].present - k.nodes[0].wmark_min;
        assert_eq!(k.alloc_page(&Mempolicy::DEFAULT, 0, &mut 0.0), Some(1));
        assert_eq!((k.vmstat.get(NumaHit) - before.0, k.vmstat.get(NumaMiss) - before.1), (1, 1));
    }

    /// /sys/devices/system/node/nodeN/numastat: hit, miss, local and other count on the node
    /// that gave the page, numa_foreign on the node the policy preferred.
    #[test]
    fn per_node_numastat_counts_where_the_page_came_from() {
        use super::NumaStat::*;
        let mut k = small_kernel("");
        let before: Vec<_> = k.nodes.iter().map(|n| n.numastat).collect();
        let delta = |k: &crate::kernel::Kernel, n: usize, s: super::NumaStat| k.nodes[n].numastat[s as usize] - before[n][s as usize];
        assert_eq!(k.alloc_page(&Mempolicy::DEFAULT, 0, &mut 0.0), Some(0)); // CPU 0 is on node 0
        assert_eq!((delta(&k, 0, Hit), delta(&k, 0, LocalNode)), (1, 1));
        k.nodes[0].used = k.nodes[0].present - k.nodes[0].wmark_min;
        assert_eq!(k.alloc_page(&Mempolicy::DEFAULT, 0, &mut 0.0), Some(1)); // node 0 full: node 1 gives it
        assert_eq!((delta(&k, 1, Miss), delta(&k, 1, OtherNode), delta(&k, 0, Foreign)), (1, 1, 1));
        assert_eq!((delta(&k, 1, Hit), delta(&k, 0, Miss), delta(&k, 1, Foreign)), (0, 0, 0));
    }

    /// mm/page_alloc.c: rmqueue -> zone_statistics(preferred_zone, zone, 1) — one numa_hit
    /// (and numa_local) per allocation whatever its order, while PGALLOC counts 1 << order.
    #[test]
    fn a_thp_allocation_is_one_numa_hit_and_512_pgalloc() {
        let mut k = small_kernel("");
        let before = (k.vmstat.get(NumaHit), k.vmstat.get(NumaLocal), k.vmstat.get(Pgalloc));
        assert_eq!(k.alloc_pages(&Mempolicy::DEFAULT, 0, 9), Some(0));
        let after = (k.vmstat.get(NumaHit), k.vmstat.get(NumaLocal), k.vmstat.get(Pgalloc));
        assert_eq!((after.0 - before.0, after.1 - before.1, after.2 - before.2), (1, 1, 512));
        assert!(k.alloc_pages_thisnode(1, 0, 9));
        assert_eq!(k.vmstat.get(NumaHit) - after.0, 1, "a migration target too");
    }

    /// mm/page_alloc.c: __alloc_pages_direct_reclaim -> __perform_reclaim -> try_to_free_pages
    /// (sc->nr_to_reclaim = SWAP_CLUSTER_MAX) — an order-0 allocation bound to a DRAM node at
    /// its min watermark reclaims 32 pages by demotion and takes one; the next 31 allocations
    /// find them free, the 33rd reclaims again. The time goes to the caller's `sys_ns`; a large
    /// folio (GFP_TRANSHUGE_LIGHT) does not reclaim and falls back.
    #[test]
    fn direct_reclaim_frees_a_cluster_per_attempt() {
        let mut k = crate::testutil::tiered_kernel("demotion_enabled = true", 2);
        let bind0 = Mempolicy::bind(0b1);
        k.nodes[0].used = k.nodes[0].present - k.nodes[0].wmark_min;
        assert_eq!(k.alloc_pages(&bind0, 0, 9), None, "no direct reclaim for a THP");
        assert_eq!(k.vmstat.get(PgdemoteDirect), 0);
        let mut sys = 0.0;
        assert_eq!(k.alloc_page(&bind0, 0, &mut sys), Some(0));
        assert_eq!(k.vmstat.get(PgdemoteDirect), 32);
        assert!(sys > 32.0 * k.cost.migrate_page_ns, "{sys} ns of direct reclaim");
        for _ in 0..31 {
            let before = sys;
            assert_eq!(k.alloc_page(&bind0, 0, &mut sys), Some(0));
            assert_eq!((k.vmstat.get(PgdemoteDirect), sys), (32, before), "the reclaimed pages serve the next allocations");
        }
        assert_eq!(k.alloc_page(&bind0, 0, &mut sys), Some(0));
        assert_eq!(k.vmstat.get(PgdemoteDirect), 64);
    }

    /// mm/mempolicy.c: MPOL_BIND — only the bound nodes; none left means no page (OOM).
    #[test]
    fn bind_policy_never_leaves_its_nodes() {
        let mut k = small_kernel("");
        k.nodes[1].used = k.nodes[1].present - k.nodes[1].wmark_min;
        assert_eq!(k.alloc_page(&Mempolicy::bind(0b10), 0, &mut 0.0), None);
        assert_eq!(k.alloc_page(&Mempolicy::bind(0b11), 2, &mut 0.0), Some(0));
    }
}

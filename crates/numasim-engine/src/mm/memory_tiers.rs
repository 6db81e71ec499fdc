//! Memory tiers and demotion targets (mm/memory-tiers.c; before 6.1 mm/migrate.c's node
//! migration order), by release (variants.rs: `memory_tiers`). tiering.md §3.1.

use crate::cost::CostProfile;
use crate::topology::Topology;
use crate::variants::MemoryTiers as Variant;
use serde::Serialize;

/// Who onlined a node's memory (the memory type a driver gives it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryType {
    Dram,
    /// Device memory onlined by dax/kmem (PMEM, CXL): MEMTIER_DEFAULT_DAX_ADISTANCE.
    Kmem,
}

pub fn all_dram(v: &[MemoryType]) -> bool {
    v.iter().all(|&t| t == MemoryType::Dram)
}

// include/linux/memory-tiers.h
pub const MEMTIER_CHUNK_BITS: u32 = 7;
pub const MEMTIER_ADISTANCE_DRAM: u32 = (4 << MEMTIER_CHUNK_BITS) + (1 << (MEMTIER_CHUNK_BITS - 1));
// drivers/dax/kmem.c
pub const MEMTIER_DEFAULT_DAX_ADISTANCE: u32 = MEMTIER_ADISTANCE_DRAM * 5;

/// Every node's tier, whether it is top tier, and where reclaim demotes its pages.
#[derive(Debug, Clone)]
pub struct NodeTiers {
    /// Abstract distance (6.1+), or the DRAM value for every node before.
    pub adistance: Vec<u32>,
    /// node_is_toptier.
    pub toptier: Vec<bool>,
    /// Preferred demotion targets (node_demotion[n].preferred; empty: none).
    pub demotion: Vec<Vec<usize>>,
    /// Every node of the tiers below a node's (node_get_allowed_targets, the lower_tier_mask
    /// of its tier; 6.1+): where demotion falls back when the preferred target is full.
    pub allowed: Vec<Vec<usize>>,
}

impl NodeTiers {
    // mm/memory-tiers.c: set_node_memory_tier, establish_demotion_targets, node_is_toptier
    pub fn build(topo: &Topology, types: &[MemoryType], hmat: bool, cost: &CostProfile, v: Variant) -> Self {
        let n = topo.nr_nodes;
        let has_cpu = |x: usize| !topo.node_cpus[x].is_empty();
        if v == Variant::Base {
            return NodeTiers { adistance: vec![MEMTIER_ADISTANCE_DRAM; n], toptier: vec![true; n], demotion: vec![Vec::new(); n], allowed: vec![Vec::new(); n] };
        }
        if v == Variant::V5_15 {
            // 79c28a416722: the migration order starts at the CPU nodes and follows distance to
            // the memory-only ones; 5.18's node_is_toptier is node_state(N_CPU)
            let toptier: Vec<bool> = (0..n).map(has_cpu).collect();
            let demotion = (0..n).map(|a| if toptier[a] { nearest(topo, a, |b| !toptier[b]) } else { Vec::new() }).collect();
            // alloc_demote_page allocates on the target only (__GFP_THISNODE)
            return NodeTiers { adistance: vec![MEMTIER_ADISTANCE_DRAM; n], toptier, demotion, allowed: vec![Vec::new(); n] };
        }
        let dram = (0..n).find(|&x| has_cpu(x));
        let adistance: Vec<u32> = (0..n)
            .map(|x| match (types[x], v) {
                // 6.7+: a driver's node asks HMAT first (mt_calc_adistance), else its default
                (MemoryType::Kmem, Variant::V6_10) if hmat => perf_adistance(topo, cost, x, dram).unwrap_or(MEMTIER_DEFAULT_DAX_ADISTANCE),
                (MemoryType::Kmem, _) => MEMTIER_DEFAULT_DAX_ADISTANCE,
                (MemoryType::Dram, Variant::V6_10) if hmat => perf_adistance(topo, cost, x, dram).unwrap_or(MEMTIER_ADISTANCE_DRAM),
                (MemoryType::Dram, _) => MEMTIER_ADISTANCE_DRAM,
            })
            .collect();
        let start = |x: usize| adistance[x] >> MEMTIER_CHUNK_BITS << MEMTIER_CHUNK_BITS;
        // top_tier_adistance: the end of the slowest tier that holds a node with CPUs
        let top = (0..n).filter(|&x| has_cpu(x)).map(start).max().unwrap_or(0) + (1 << MEMTIER_CHUNK_BITS) - 1;
        let toptier = (0..n).map(|x| start(x) <= top).collect();
        let demotion = (0..n)
            .map(|a| {
                // the next lower tier that has nodes
                let next = (0..n).map(start).filter(|&s| s > start(a)).min();
                next.map_or(Vec::new(), |s| nearest(topo, a, |b| start(b) == s))
            })
            .collect();
        // 32008027 (v6.1, "demote pages according to allocation fallback order")
        let allowed = (0..n).map(|a| (0..n).filter(|&b| start(b) > start(a)).collect()).collect();
        NodeTiers { adistance, toptier, demotion, allowed }
    }
}

/// The nodes matching `ok` at the smallest distance from `from` (ties kept).
fn nearest(topo: &Topology, from: usize, ok: impl Fn(usize) -> bool) -> Vec<usize> {
    let best = (0..topo.nr_nodes).filter(|&b| ok(b)).map(|b| topo.node_distance(from, b)).min();
    (0..topo.nr_nodes).filter(|&b| ok(b) && Some(topo.node_distance(from, b)) == best).collect()
}

/// HMAT abstract distance: DRAM's 576 scaled by the node's latency over the reference DRAM's
/// and by the DRAM's bandwidth over the node's. The initiator of a CPU-less node is its
/// nearest CPU node; None without a reference DRAM node.
// mm/memory-tiers.c: mt_perf_to_adistance (3718c02dbd4c)
fn perf_adistance(topo: &Topology, cost: &CostProfile, node: usize, dram: Option<usize>) -> Option<u32> {
    let d = dram?;
    let initiator = if topo.node_cpus[node].is_empty() { *nearest(topo, node, |b| !topo.node_cpus[b].is_empty()).first()? } else { node };
    let (lat, lat_d) = (cost.latency_ns[initiator][node], cost.latency_ns[d][d]);
    let (bw, bw_d) = (cost.node_bandwidth_gibps[node], cost.node_bandwidth_gibps[d]);
    Some((MEMTIER_ADISTANCE_DRAM as f64 * lat / lat_d * bw_d / bw) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variants::MemoryTiers as V;

    fn dram_and_cxl(kmem: bool, hmat: bool, v: V) -> NodeTiers {
        let topo = Topology::build(&[4, 0], 1, vec![1 << 18; 2], vec![vec![10, 20], vec![20, 10]]);
        let mut cost = crate::scenario::parse_scenario(crate::testutil::SMALL).expect("fixture parses").machine.cost;
        cost.latency_ns = vec![vec![100.0, 250.0], vec![250.0, 100.0]];
        cost.node_bandwidth_gibps = vec![20.0, 10.0];
        let types = [MemoryType::Dram, if kmem { MemoryType::Kmem } else { MemoryType::Dram }];
        NodeTiers::build(&topo, &types, hmat, &cost, v)
    }

    /// mm/memory-tiers.c: a CPU-less node without a driver is in the DRAM tier from 6.1 (no
    /// promotion, no demotion: tiering.md §5.1 pitfall 1); before, node_is_toptier was N_CPU.
    #[test]
    fn a_plain_cpu_less_node_is_a_lower_tier_only_before_6_1() {
        let t = dram_and_cxl(false, false, V::V5_15);
        assert_eq!((t.toptier.clone(), t.demotion.clone()), (vec![true, false], vec![vec![1], vec![]]));
        let t = dram_and_cxl(false, false, V::V6_1);
        assert_eq!((t.toptier.clone(), t.demotion.clone()), (vec![true, true], vec![vec![], vec![]]));
    }

    /// drivers/dax/kmem.c: MEMTIER_DEFAULT_DAX_ADISTANCE (2880, memory_tier22) puts a kmem node
    /// below DRAM; with HMAT (6.7+) its latency x 1/bandwidth decides: 576 x 2.5 x 2 = 2880.
    #[test]
    fn kmem_and_hmat_nodes_are_a_lower_tier() {
        let t = dram_and_cxl(true, false, V::V6_1);
        assert_eq!((t.adistance.clone(), t.toptier.clone(), t.demotion[0].clone()), (vec![576, 2880], vec![true, false], vec![1]));
        let t = dram_and_cxl(false, true, V::V6_10);
        assert_eq!((t.adistance[1], t.toptier[1], t.demotion[0].clone()), (2880, false, vec![1]));
        assert!(dram_and_cxl(false, true, V::V6_1).toptier[1], "6.1 does not read HMAT");
    }
}

//! Kernel invariants checked during every run: a violation is an engine bug, reported as an error.

use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::mm::page_alloc::NumaStat;
use crate::vmstat::VmEvent;

fn fail(k: &Kernel, name: &str, detail: String) -> Error {
    Error::Invariant { name: name.into(), at_s: k.now as f64 / 1e9, detail }
}

/// Counter relations and page conservation (cheap; run at every sample).
pub fn check_counters(k: &Kernel) -> Result<()> {
    let v = &k.vmstat;
    if v.get(VmEvent::NumaHintFaultsLocal) > v.get(VmEvent::NumaHintFaults) {
        return Err(fail(k, "hint_local_le_hint_faults", format!("{} > {}", v.get(VmEvent::NumaHintFaultsLocal), v.get(VmEvent::NumaHintFaults))));
    }
    if v.get(VmEvent::NumaPagesMigrated) > v.get(VmEvent::PgmigrateSuccess) {
        return Err(fail(k, "numa_migrated_le_pgmigrate_success", String::new()));
    }
    let pairs = [
        (NumaStat::Hit, VmEvent::NumaHit),
        (NumaStat::Miss, VmEvent::NumaMiss),
        (NumaStat::Foreign, VmEvent::NumaForeign),
        (NumaStat::LocalNode, VmEvent::NumaLocal),
        (NumaStat::OtherNode, VmEvent::NumaOther),
    ];
    for (stat, event) in pairs {
        let per_node: u64 = k.nodes.iter().map(|n| n.numastat[stat as usize]).sum();
        if per_node != v.get(event) {
            return Err(fail(k, "numastat_sums_to_vmstat", format!("{stat:?}: nodes sum to {per_node}, /proc/vmstat has {}", v.get(event))));
        }
    }
    for (n, node) in k.nodes.iter().enumerate() {
        // a shmem page is held by its file once, and counted in every mm that maps it
        let held: u64 = k.mms.iter().map(|m| m.node_pages[n] - m.shared_pages[n]).sum::<u64>() + k.shmem.iter().map(|f| f.node_pages[n]).sum::<u64>();
        if held != node.used {
            return Err(fail(k, "pages_conserved", format!("node {n}: mms hold {held} pages, allocator says {}", node.used)));
        }
        if node.used > node.present {
            return Err(fail(k, "node_capacity", format!("node {n}: {} used > {} present", node.used, node.present)));
        }
    }
    Ok(())
}

/// Page arrays agree with the block summaries and the mm's per-node counts (O(pages)).
pub fn check_mm(k: &Kernel, mm: usize) -> Result<()> {
    let m = &k.mms[mm];
    let mut per_node = vec![0u64; k.topo.nr_nodes];
    for (vi, v) in m.vmas.iter().enumerate() {
        if !v.pt.summaries_agree() {
            return Err(fail(k, "block_summaries", format!("mm {} vma {vi}: block summary differs from pages", m.tgid)));
        }
        if !v.pt.pmd_blocks_whole() {
            return Err(fail(k, "pmd_thp_whole", format!("mm {} vma {vi}: a PMD-mapped block is not one uniform order-9 folio", m.tgid)));
        }
        for (c, t) in per_node.iter_mut().zip(v.pt.node_totals()) {
            *c += t;
        }
    }
    if per_node[..] != m.node_pages[..k.topo.nr_nodes] {
        return Err(fail(k, "mm_node_pages", format!("mm {}: pages {per_node:?} vs counters {:?}", m.tgid, &m.node_pages[..k.topo.nr_nodes])));
    }
    Ok(())
}

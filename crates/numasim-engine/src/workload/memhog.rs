//! A memory eater: `numactl --membind=N memhog SIZE` holding its memory until killed
//! (numactl/memhog.c; workloads.md §5).

use super::autonuma::{new_mm, new_task};
use super::Op;
use crate::error::ScenarioProblem;
use crate::kernel::Kernel;
use crate::mm::mempolicy::Mempolicy;
use crate::mm::types::{VM_READ, VM_WRITE};
use crate::scenario::raw::RawWorkload;
use crate::topology::Topology;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct MemoryEaterSpec {
    pub kind: String,
    pub size_gib: f64,
    pub node: usize,
    pub start_s: f64,
    /// When the eater is killed and its memory freed.
    pub free_at_s: f64,
}

impl MemoryEaterSpec {
    pub fn resolve(w: &RawWorkload, i: usize, topo: &Topology, p: &mut Vec<ScenarioProblem>) -> Option<Self> {
        super::reject_keys(w, i, &["size_gib", "node", "start_s", "free_at_s"], p);
        let start = p.len();
        let mut bad = |key: &str, msg: String| p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", msg));
        let size_gib = w.size_gib.unwrap_or(0.0);
        if !(size_gib > 0.0 && size_gib <= 1e6) {
            bad("size_gib", format!("give the memory to eat, in (0, 1e6] GiB; got {size_gib}"));
        }
        let node = w.node.unwrap_or(0);
        if node < 0 || node as usize >= topo.nr_nodes {
            bad("node", format!("node {node} does not exist (the machine has {} nodes)", topo.nr_nodes));
        }
        let start_s = w.start_s.unwrap_or(0.0);
        let Some(free_at_s) = w.free_at_s else {
            bad("free_at_s", "give the time the eater is killed (free_at_s)".into());
            return None;
        };
        if !(start_s >= 0.0 && free_at_s > start_s && free_at_s < 1e6) {
            bad("free_at_s", format!("must be after start_s ({start_s}) and below 1e6, got {free_at_s}"));
        }
        if size_gib * 262144.0 > topo.node_pages.get(node.max(0) as usize).copied().unwrap_or(0) as f64 {
            p.push(ScenarioProblem::new(format!("workload[{i}].size_gib"), "exceeds_machine_memory", format!("{size_gib} GiB does not fit on node {node}")));
        }
        (p.len() == start).then(|| MemoryEaterSpec { kind: w.kind.clone(), size_gib, node: node as usize, start_s, free_at_s })
    }

    pub fn footprint_pages(&self) -> u64 {
        (self.size_gib * 262144.0) as u64
    }

    pub fn build(&self, k: &mut Kernel, index: usize) {
        let mm = new_mm(k, "memhog");
        let vma = k.mms[mm].mmap_anon(self.footprint_pages(), VM_READ | VM_WRITE);
        let prog = vec![Op::SetPolicy(Mempolicy::bind(1 << self.node)), Op::Sweep { vma, first: 0, npages: self.footprint_pages(), passes: 1 }, Op::SleepUntil((self.free_at_s * 1e9) as u64)];
        new_task(k, mm, "memhog", index, prog, None, (self.start_s * 1e9) as u64);
    }
}

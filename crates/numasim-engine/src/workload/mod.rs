//! Workloads: each builds processes (mm + VMAs) and threads with small programs of [`Op`]s.

pub mod autonuma;
pub mod exec;

use crate::error::ScenarioProblem;
use crate::kernel::Kernel;
use crate::mm::mempolicy::Mempolicy;
use crate::scenario::raw::RawWorkload;
use crate::sim::rng::Rng;
use crate::topology::Topology;
use serde::Serialize;

/// One step of a thread's program.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// set_mempolicy(2)
    SetPolicy(Mempolicy),
    /// sched_setaffinity(2) to the CPUs of a node mask
    SetAffinity(u8),
    /// Sequential store stream (memset) over VMA pages [first, first + npages), `passes` times.
    Sweep { vma: usize, first: u64, npages: u64, passes: u32 },
    /// clone(2)/fork(2) every child prepared for this task
    Spawn,
    /// pthread_join / wait(2) for every child
    Join,
}

#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum WorkloadSpec {
    Autonuma(autonuma::AutonumaSpec),
}

impl WorkloadSpec {
    /// Pages of memory the workload maps.
    pub fn footprint_pages(&self) -> u64 {
        match self {
            WorkloadSpec::Autonuma(a) => a.footprint_pages(),
        }
    }

    /// Create the workload's processes and threads in `k`.
    pub fn build(&self, k: &mut Kernel, index: usize, rng: &mut Rng) {
        match self {
            WorkloadSpec::Autonuma(a) => a.build(k, index, rng),
        }
    }
}

/// Resolve `[[workload]]` number `i`; problems are pushed with their location.
pub fn resolve(w: &RawWorkload, i: usize, topo: &Topology, p: &mut Vec<ScenarioProblem>) -> Option<WorkloadSpec> {
    if let Some(kind) = autonuma::AutonumaSpec::parse_kind(&w.kind) {
        return autonuma::AutonumaSpec::resolve(kind, w, i, topo, p).map(WorkloadSpec::Autonuma);
    }
    p.push(ScenarioProblem::new(
        format!("workload[{i}].kind"),
        "invalid_value",
        format!("unknown workload kind `{}`, expected one of {}", w.kind, autonuma::KINDS.join(", ")),
    ));
    None
}

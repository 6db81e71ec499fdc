//! `migratepages PID FROM TO` in a loop, moving a running workload's pages back and forth
//! (numactl/migratepages.c -> migrate_pages(2); workloads.md §5).

use super::autonuma::{new_mm, new_task};
use super::Op;
use crate::error::ScenarioProblem;
use crate::kernel::Kernel;
use crate::scenario::raw::RawWorkload;
use crate::topology::Topology;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct MigratePagesSpec {
    pub kind: String,
    /// Index of the workload whose first process is migrated.
    pub target: usize,
    pub from: usize,
    pub to: usize,
    /// Round trips (from -> to, then to -> from).
    pub loops: u32,
    pub interval_s: f64,
    pub start_s: f64,
}

impl MigratePagesSpec {
    pub fn resolve(w: &RawWorkload, i: usize, nr_workloads: usize, topo: &Topology, p: &mut Vec<ScenarioProblem>) -> Option<Self> {
        super::reject_keys(w, i, &["target", "from", "to", "loops", "interval_s", "start_s"], p);
        let start = p.len();
        let mut bad = |key: &str, msg: String| p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", msg));
        let target = check_target(w, i, nr_workloads, &mut bad);
        let (from, to) = (w.from.unwrap_or(0), w.to.unwrap_or(1));
        for (key, n) in [("from", from), ("to", to)] {
            if n < 0 || n as usize >= topo.nr_nodes {
                bad(key, format!("node {n} does not exist (the machine has {} nodes)", topo.nr_nodes));
            }
        }
        if from == to {
            bad("to", "must differ from `from`".into());
        }
        let (loops, interval_s, start_s) = check_loops(w, &mut bad);
        (p.len() == start).then(|| MigratePagesSpec { kind: w.kind.clone(), target, from: from as usize, to: to as usize, loops, interval_s, start_s })
    }

    pub fn build(&self, k: &mut Kernel, index: usize) {
        let mm = new_mm(k, "migratepages", 0);
        let mut prog = Vec::new();
        for _ in 0..self.loops {
            prog.push(Op::MigratePages { workload: self.target, from: self.from, to: self.to });
            prog.push(Op::SleepFor((self.interval_s * 1e9) as u64));
            prog.push(Op::MigratePages { workload: self.target, from: self.to, to: self.from });
            prog.push(Op::SleepFor((self.interval_s * 1e9) as u64));
        }
        new_task(k, mm, "migratepages", index, prog, None, (self.start_s * 1e9) as u64);
    }
}

/// move_pages(2) of a range of another workload's first process (its first VMA) to one node,
/// `loops` times.
#[derive(Debug, Clone, Serialize)]
pub struct MovePagesSpec {
    pub kind: String,
    pub target: usize,
    /// Destination node.
    pub node: usize,
    /// The range, in MiB from the start of the target's first VMA (None: to its end).
    pub first_mib: u64,
    pub size_mib: Option<u64>,
    pub loops: u32,
    pub interval_s: f64,
    pub start_s: f64,
}

impl MovePagesSpec {
    pub fn resolve(w: &RawWorkload, i: usize, nr_workloads: usize, topo: &Topology, p: &mut Vec<ScenarioProblem>) -> Option<Self> {
        super::reject_keys(w, i, &["target", "node", "first_mib", "size_mib", "loops", "interval_s", "start_s"], p);
        let start = p.len();
        let mut bad = |key: &str, msg: String| p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", msg));
        let target = check_target(w, i, nr_workloads, &mut bad);
        let node = w.node.unwrap_or(-1);
        if node < 0 || node as usize >= topo.nr_nodes {
            bad("node", format!("give the destination node (the machine has {} nodes), got {node}", topo.nr_nodes));
        }
        let first = w.first_mib.unwrap_or(0);
        if !(0..1 << 32).contains(&first) || w.size_mib.is_some_and(|s| !(1..1 << 32).contains(&s)) {
            bad("first_mib", "first_mib >= 0 and size_mib >= 1 (MiB)".into());
        }
        let (loops, interval_s, start_s) = check_loops(w, &mut bad);
        (p.len() == start).then(|| MovePagesSpec { kind: w.kind.clone(), target, node: node as usize, first_mib: first as u64, size_mib: w.size_mib.map(|s| s as u64), loops, interval_s, start_s })
    }

    pub fn build(&self, k: &mut Kernel, index: usize) {
        let mm = new_mm(k, "move_pages", 0);
        let npages = self.size_mib.map(|s| s * 256).unwrap_or(u64::MAX / 2);
        let mut prog = Vec::new();
        for _ in 0..self.loops {
            prog.push(Op::MovePages { workload: self.target, vma: 0, first: self.first_mib * 256, npages, to: self.node });
            prog.push(Op::SleepFor((self.interval_s * 1e9) as u64));
        }
        new_task(k, mm, "move_pages", index, prog, None, (self.start_s * 1e9) as u64);
    }
}

/// `target`: another workload, by index.
fn check_target(w: &RawWorkload, i: usize, nr_workloads: usize, bad: &mut impl FnMut(&str, String)) -> usize {
    let target = w.target.unwrap_or(-1);
    if target < 0 || target as usize >= nr_workloads || target as usize == i {
        bad("target", format!("must name another [[workload]] by index (0..{nr_workloads}), got {target}"));
    }
    target.max(0) as usize
}

/// `loops`, `interval_s`, `start_s` of a system-call loop.
fn check_loops(w: &RawWorkload, bad: &mut impl FnMut(&str, String)) -> (u32, f64, f64) {
    let loops = w.loops.unwrap_or(1);
    if !(1..=1_000_000).contains(&loops) {
        bad("loops", format!("must be in 1..=1000000, got {loops}"));
    }
    let interval_s = w.interval_s.unwrap_or(0.0);
    let start_s = w.start_s.unwrap_or(0.0);
    if !((0.0..1e6).contains(&interval_s) && (0.0..1e6).contains(&start_s)) {
        bad("interval_s", format!("interval_s and start_s must be in [0, 1e6), got {interval_s} and {start_s}"));
    }
    (loops.clamp(1, 1_000_000) as u32, interval_s, start_s)
}

impl Kernel {
    /// The first process of workload `w` (the target of its migrate_pages(2) callers).
    pub fn workload_mm(&self, w: usize) -> Option<usize> {
        self.tasks.iter().find(|x| x.workload == w && x.parent.is_none()).map(|x| x.mm)
    }

    /// VMA `vma` of the ones workload `workload`'s first process mapped itself (after its image).
    pub fn workload_vma(&self, workload: usize, vma: usize) -> usize {
        vma + self.workload_mm(workload).and_then(|mm| self.images.get(&mm)).map_or(0, |i| i.first_buffer)
    }
}

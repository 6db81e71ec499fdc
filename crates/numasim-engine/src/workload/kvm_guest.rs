//! A KVM guest with an assigned device (seed 004): QEMU maps guest RAM (MADV_HUGEPAGE), VFIO
//! pins a part or all of it long-term at start (faulting it in), then the vCPU threads run
//! the guest, whose accesses go through the secondary MMU (EPT) and refault after each zap.

use super::autonuma::{new_mm, new_task};
use super::random::AccessSampler;
use super::Op;
use crate::error::ScenarioProblem;
use crate::kernel::Kernel;
use crate::kvm::Vm;
use crate::mm::types::{VM_HUGEPAGE, VM_READ, VM_WRITE};
use crate::scenario::raw::RawWorkload;
use crate::sim::rng::Rng;
use crate::topology::Topology;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct KvmGuestSpec {
    pub kind: String,
    pub vcpus: usize,
    pub memory_mib: u64,
    /// Share of guest RAM (from its start) that VFIO pins long-term (FOLL_LONGTERM).
    pub pinned_fraction: f64,
    /// Guest accesses that are reads, percent.
    pub read_ratio: u32,
    /// Guest work per access besides the memory access, ns.
    pub overhead_ns: f64,
    /// CPU affinity of the vCPU threads (node mask).
    pub nodes: crate::topology::NodeMask,
    pub duration_s: f64,
    pub start_s: f64,
}

impl KvmGuestSpec {
    pub fn resolve(w: &RawWorkload, i: usize, topo: &Topology, p: &mut Vec<ScenarioProblem>) -> Option<Self> {
        super::reject_keys(w, i, &["vcpus", "memory_mib", "pinned_fraction", "read_ratio", "overhead_ns", "nodes", "duration_s", "start_s"], p);
        let start = p.len();
        let mut bad = |key: &str, msg: String| p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", msg));
        let vcpus = w.vcpus.unwrap_or(4);
        if !(1..=1024).contains(&vcpus) {
            bad("vcpus", format!("must be in 1..=1024, got {vcpus}"));
        }
        let memory_mib = w.memory_mib.unwrap_or(4096);
        if !(2..=1 << 30).contains(&memory_mib) {
            bad("memory_mib", format!("must be in 2..=1073741824, got {memory_mib}"));
        }
        let pinned_fraction = w.pinned_fraction.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&pinned_fraction) {
            bad("pinned_fraction", format!("must be in [0, 1], got {pinned_fraction}"));
        }
        let read_ratio = w.read_ratio.unwrap_or(70);
        if !(0..=100).contains(&read_ratio) {
            bad("read_ratio", format!("must be in 0..=100, got {read_ratio}"));
        }
        let overhead_ns = w.overhead_ns.unwrap_or(100.0);
        if !(0.0..1e9).contains(&overhead_ns) {
            bad("overhead_ns", format!("must be in [0, 1e9), got {overhead_ns}"));
        }
        let duration_s = w.duration_s.unwrap_or(f64::NAN);
        if !(duration_s > 0.0 && duration_s < 1e6) {
            bad("duration_s", format!("give the guest's run time in (0, 1e6) s, got {duration_s}"));
        }
        let start_s = w.start_s.unwrap_or(0.0);
        if !(0.0..1e6).contains(&start_s) {
            bad("start_s", format!("must be in [0, 1e6), got {start_s}"));
        }
        let mut nodes: crate::topology::NodeMask = 0;
        for &n in w.nodes.as_deref().unwrap_or(&[]) {
            if n < 0 || n as usize >= topo.nr_nodes {
                bad("nodes", format!("node {n} does not exist (the machine has {} nodes)", topo.nr_nodes));
            } else {
                nodes |= 1 << n;
            }
        }
        if w.nodes.is_none() {
            nodes = crate::topology::nodes_below(topo.nr_nodes);
        } else if nodes == 0 {
            bad("nodes", "give at least one node".into());
        } else if !(0..topo.nr_nodes).any(|n| nodes & (1 << n) != 0 && topo.has_cpu(n)) {
            bad("nodes", "the vCPU threads run on these nodes' CPUs, and they have none".into());
        }
        let memory_pages = memory_mib.max(0) as u64 * 256;
        if memory_pages > topo.node_pages.iter().sum::<u64>() {
            p.push(ScenarioProblem::new(format!("workload[{i}].memory_mib"), "exceeds_machine_memory", format!("{memory_mib} MiB of guest RAM does not fit in the machine")));
        }
        (p.len() == start).then(|| KvmGuestSpec {
            kind: w.kind.clone(),
            vcpus: vcpus as usize,
            memory_mib: memory_mib as u64,
            pinned_fraction,
            read_ratio: read_ratio as u32,
            overhead_ns,
            nodes,
            duration_s,
            start_s,
        })
    }

    pub fn footprint_pages(&self) -> u64 {
        self.memory_mib * 256
    }

    /// Pinned guest pages, rounded down to whole 2 MiB blocks (VFIO maps the RAM in large chunks).
    pub fn pinned_pages(&self) -> u64 {
        let pages = self.footprint_pages();
        ((pages as f64 * self.pinned_fraction) as u64 / 512 * 512).min(pages)
    }

    pub fn build(&self, k: &mut Kernel, index: usize, rng: &mut Rng) {
        let pages = self.footprint_pages();
        let pinned = self.pinned_pages();
        let mm = new_mm(k, "qemu-system-x86", self.vcpus);
        // qemu_ram_alloc + qemu_madvise(QEMU_MADV_HUGEPAGE)
        let vma = k.mms[mm].mmap_anon(pages, VM_READ | VM_WRITE | VM_HUGEPAGE);
        let weights = vec![1.0 / pages as f64; pages as usize];
        let write_share = (100 - self.read_ratio) as f64 / 100.0;
        let mut sampler = AccessSampler::new(mm, vma, weights.into(), write_share, self.overhead_ns, Rng::new(rng.next_u64(), 0));
        sampler.kvm = Some(k.kvms.len());
        k.samplers.push(sampler);
        let s = k.samplers.len() - 1;
        k.mms[mm].sampler = Some(s);
        k.kvms.push(Vm::new(mm, vma, pages));
        let vm = k.kvms.len() - 1;
        // vfio_pin_pages_remote: pin_user_pages(FOLL_LONGTERM | FOLL_WRITE) faults each page in
        // and pins it at once
        let mut prog = Vec::new();
        if pinned > 0 {
            prog.push(Op::PinLongterm { vma, first: 0, npages: pinned });
            prog.push(Op::Sweep { vma, first: 0, npages: pinned, passes: 1 });
        }
        prog.extend([Op::Spawn, Op::Join]);
        let allowed: Vec<bool> = k.topo.cpu_node.iter().map(|&n| self.nodes & (1 << n) != 0).collect();
        let main = new_task(k, mm, "qemu-system-x86", index, prog, None, (self.start_s * 1e9) as u64);
        k.tasks[main].allowed = allowed.clone();
        for _ in 0..self.vcpus {
            let op = Op::RandomAccess { sampler: s, warmup: 0, duration_ns: (self.duration_s * 1e9) as u64, overhead_ns: self.overhead_ns };
            let t = new_task(k, mm, "CPU/KVM", index, vec![op], Some(main), 0);
            k.tasks[t].allowed = allowed.clone();
            k.kvms[vm].vcpus.push(t);
        }
    }
}

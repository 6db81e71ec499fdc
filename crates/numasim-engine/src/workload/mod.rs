//! Workloads: each builds processes (mm + VMAs) and threads with small programs of [`Op`]s.

pub mod autonuma;
pub mod exec;
pub mod image;
pub mod kvm_guest;
pub mod memhog;
pub mod migratepages;
pub mod plan;
pub mod pmbench;
pub mod program;
pub mod random;
pub mod remote_toucher;
pub mod sampler;
pub mod stream;
pub mod xfsrepair;

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
    SetAffinity(crate::topology::NodeMask),
    /// Sequential store stream (memset) over VMA pages [first, first + npages), `passes` times.
    Sweep { vma: usize, first: u64, npages: u64, passes: u32 },
    /// The same stream, pass after pass, until `duration_ns` of wall time after the op starts;
    /// each page is loaded before it is stored to (numaw's streaming pass), which matters for a
    /// fault on an unmapped shared page (a read fault: mm/shmem.rs, fault-around).
    SweepFor { vma: usize, first: u64, npages: u64, duration_ns: u64 },
    /// execve(2) of a program with a process image: its start-up touches the image (image.rs)
    Exec,
    /// clone(2)/fork(2) every child prepared for this task
    Spawn,
    /// pthread_join / wait(2) for every child
    Join,
    /// Sleep until an absolute time, ns (then go on; memhog holding memory, a loop's pause).
    SleepUntil(u64),
    /// Sleep for a while, ns.
    SleepFor(u64),
    /// migrate_pages(2) of the first process of workload `workload` from node `from` to `to`.
    MigratePages { workload: usize, from: usize, to: usize },
    /// move_pages(2) of pages [first, first + npages) of that process's VMA `vma` to node `to`.
    MovePages { workload: usize, vma: usize, first: u64, npages: u64, to: usize },
    /// Random single accesses drawn from sampler `sampler`: `warmup` untimed accesses, then a
    /// timed phase of `duration_ns` (pmbench's main loop); `overhead_ns` per access.
    RandomAccess { sampler: usize, warmup: u64, duration_ns: u64, overhead_ns: f64 },
    /// pmbench's linear pattern (stride 1): pages [0, npages) of VMA `vma` in order, one single
    /// access each (`overhead_ns` besides the memory latency); one untimed pass (the warm-up),
    /// then pass after pass for `duration_ns` (the timed loop).
    LinearAccess { vma: usize, npages: u64, duration_ns: u64, overhead_ns: f64 },
    /// A direct-I/O read into `pages` pages of the process's sampled VMA: the pages stay pinned
    /// while the task sleeps `ns` waiting for the device.
    DirectIo { pages: u64, ns: u64 },
    /// pin_user_pages(FOLL_LONGTERM) of pages [first, first + npages) of VMA `vma`, until exit.
    PinLongterm { vma: usize, first: u64, npages: u64 },
    /// sched_setaffinity(2) to the CPUs of `Kernel::cpu_sets[set]`.
    SetCpus(usize),
    /// A `program` stream (stream.rs): every `stride`-th page of [first, first + npages) of VMA
    /// `vma`, accessed as `access` says, `passes` times, or until `duration_ns` after the op
    /// started when that is nonzero.
    Stream { vma: usize, first: u64, npages: u64, stride: u64, access: Access, passes: u32, duration_ns: u64 },
    /// The sampler's loop (sampler.rs), for ever: every `interval_ns` from its start it takes
    /// `busy_ns` of system time (reading /proc, writing its lines), and every `maps_every`-th
    /// sample `maps_ns_per_gib` more per GiB the other processes map (numa_maps), then sleeps
    /// to the next sample.
    Sample { interval_ns: u64, busy_ns: u64, maps_every: u32, maps_ns_per_gib: u64 },
}

/// What a `program` stream does to each page it reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// writes every byte (memset)
    Store,
    /// reads every cache line
    Load,
    /// reads every cache line, then writes one byte
    Rmw,
}

#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum WorkloadSpec {
    Autonuma(autonuma::AutonumaSpec),
    MemoryEater(memhog::MemoryEaterSpec),
    MigratePages(migratepages::MigratePagesSpec),
    Pmbench(pmbench::PmbenchSpec),
    MovePages(migratepages::MovePagesSpec),
    XfsRepair(xfsrepair::XfsRepairSpec),
    RemoteToucher(remote_toucher::RemoteToucherSpec),
    KvmGuest(kvm_guest::KvmGuestSpec),
    Program(program::ProgramSpec),
    Sampler(sampler::SamplerSpec),
}

impl WorkloadSpec {
    /// Pages of memory the workload maps.
    pub fn footprint_pages(&self) -> u64 {
        match self {
            WorkloadSpec::Autonuma(a) => a.footprint_pages(),
            WorkloadSpec::MemoryEater(m) => m.footprint_pages(),
            WorkloadSpec::MigratePages(_) | WorkloadSpec::MovePages(_) => 0,
            WorkloadSpec::Pmbench(p) => p.footprint_pages(),
            WorkloadSpec::XfsRepair(x) => x.cache_mib * 256,
            WorkloadSpec::RemoteToucher(r) => r.size_mib * 256,
            WorkloadSpec::KvmGuest(g) => g.footprint_pages(),
            WorkloadSpec::Program(g) => g.footprint_pages(),
            WorkloadSpec::Sampler(_) => 0,
        }
    }

    /// Host bytes the engine keeps per page of this workload: the page entry (8 B, with the
    /// event generation), plus for random-access workloads the weight (8 B) and heap entry (24 B).
    pub fn host_bytes_per_page(&self) -> u64 {
        match self {
            // a pmbench page may have two first-touch events: a zero-page read, the first store
            WorkloadSpec::Pmbench(_) => 8 + 16 + 24,
            WorkloadSpec::XfsRepair(_) | WorkloadSpec::KvmGuest(_) => 8 + 8 + 24,
            _ => 8,
        }
    }

    /// Create the workload's processes and threads in `k`.
    pub fn build(&self, k: &mut Kernel, index: usize, rng: &mut Rng) {
        match self {
            WorkloadSpec::Autonuma(a) => a.build(k, index, rng),
            WorkloadSpec::MemoryEater(m) => m.build(k, index),
            WorkloadSpec::MigratePages(m) => m.build(k, index),
            WorkloadSpec::MovePages(m) => m.build(k, index),
            WorkloadSpec::Pmbench(p) => p.build(k, index, rng),
            WorkloadSpec::XfsRepair(x) => x.build(k, index, rng),
            WorkloadSpec::RemoteToucher(r) => r.build(k, index),
            WorkloadSpec::KvmGuest(g) => g.build(k, index, rng),
            WorkloadSpec::Program(g) => g.build(k, index),
            WorkloadSpec::Sampler(s) => s.build(k, index),
        }
    }
}

/// Resolve `[[workload]]` number `i`; problems are pushed with their location.
pub fn resolve(w: &RawWorkload, i: usize, nr_workloads: usize, topo: &Topology, p: &mut Vec<ScenarioProblem>) -> Option<WorkloadSpec> {
    if let Some(kind) = autonuma::AutonumaSpec::parse_kind(&w.kind) {
        return autonuma::AutonumaSpec::resolve(kind, w, i, topo, p).map(WorkloadSpec::Autonuma);
    }
    match w.kind.as_str() {
        "memory_eater" => memhog::MemoryEaterSpec::resolve(w, i, topo, p).map(WorkloadSpec::MemoryEater),
        "migratepages" => migratepages::MigratePagesSpec::resolve(w, i, nr_workloads, topo, p).map(WorkloadSpec::MigratePages),
        "move_pages" => migratepages::MovePagesSpec::resolve(w, i, nr_workloads, topo, p).map(WorkloadSpec::MovePages),
        "pmbench" => pmbench::PmbenchSpec::resolve(w, i, topo, p).map(WorkloadSpec::Pmbench),
        "xfs_repair" => xfsrepair::XfsRepairSpec::resolve(w, i, p).map(WorkloadSpec::XfsRepair),
        "kvm_guest" => kvm_guest::KvmGuestSpec::resolve(w, i, topo, p).map(WorkloadSpec::KvmGuest),
        "remote_toucher" => remote_toucher::RemoteToucherSpec::resolve(w, i, topo, p).map(WorkloadSpec::RemoteToucher),
        "program" => program::ProgramSpec::resolve(w, i, topo, p).map(WorkloadSpec::Program),
        "sampler" => sampler::SamplerSpec::resolve(w, i, p).map(WorkloadSpec::Sampler),
        _ => {
            let mut kinds: Vec<&str> = autonuma::KINDS.to_vec();
            kinds.extend(["kvm_guest", "memory_eater", "migratepages", "move_pages", "pmbench", "program", "remote_toucher", "sampler", "xfs_repair"]);
            p.push(ScenarioProblem::new(format!("workload[{i}].kind"), "invalid_value", format!("unknown workload kind `{}`, expected one of {}", w.kind, kinds.join(", "))));
            None
        }
    }
}

/// The process image of workload `i` (image.rs): `glibc` unless the scenario says otherwise.
pub fn resolve_image(w: &RawWorkload, i: usize, p: &mut Vec<ScenarioProblem>) -> image::ImagePreset {
    match w.image.as_deref() {
        None => image::ImagePreset::Glibc,
        Some(s) => image::ImagePreset::parse(s).unwrap_or_else(|| {
            p.push(ScenarioProblem::new(format!("workload[{i}].image"), "invalid_value", format!("unknown process image `{s}`, expected glibc, numaw or none")));
            image::ImagePreset::Glibc
        }),
    }
}

/// Keys that do not apply to this kind of workload are errors, not silently ignored (`image`
/// applies to every kind).
pub fn reject_keys(w: &RawWorkload, i: usize, allowed: &[&str], p: &mut Vec<ScenarioProblem>) {
    for key in w.given() {
        if !allowed.contains(&key) {
            p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "unknown_key", format!("`{key}` does not apply to a `{}` workload (it takes {})", w.kind, allowed.join(", "))));
        }
    }
}

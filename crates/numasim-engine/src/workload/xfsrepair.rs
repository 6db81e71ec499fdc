//! xfs_repair phase of mmtests' xfsrepair (workloads.md §3): one process whose worker and
//! prefetch threads read a large buffer cache shared by all of them, with little locality,
//! between direct-I/O reads that pin their buffers while the device works.

use super::autonuma::{new_mm, new_task};
use super::random::AccessSampler;
use super::Op;
use crate::error::ScenarioProblem;
use crate::kernel::Kernel;
use crate::mm::types::{VM_NOHUGEPAGE, VM_READ, VM_WRITE};
use crate::scenario::raw::RawWorkload;
use crate::sim::rng::Rng;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct XfsRepairSpec {
    pub kind: String,
    /// Worker plus prefetch threads.
    pub threads: usize,
    /// Buffer cache (bhash=32768 is several GiB), touched uniformly by every thread.
    pub cache_mib: u64,
    pub read_ratio: u32,
    /// CPU work per buffer access (metadata parsing), ns.
    pub overhead_ns: f64,
    /// CPU burst between two I/Os, and the I/O wait, ms.
    pub compute_ms: f64,
    pub io_ms: f64,
    /// Size of one direct-I/O read into the cache (pinned during the wait).
    pub io_kib: u64,
    /// CPU seconds of work per thread: the run ends when it is done.
    pub work_s: f64,
    pub start_s: f64,
}

impl XfsRepairSpec {
    pub fn resolve(w: &RawWorkload, i: usize, p: &mut Vec<ScenarioProblem>) -> Option<Self> {
        let keys = ["threads", "cache_mib", "read_ratio", "overhead_ns", "compute_ms", "io_ms", "io_kib", "work_s", "start_s"];
        super::reject_keys(w, i, &keys, p);
        let start = p.len();
        let mut bad = |key: &str, msg: String| p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", msg));
        let threads = w.threads.unwrap_or(8);
        if !(1..=4096).contains(&threads) {
            bad("threads", format!("must be in 1..=4096, got {threads}"));
        }
        let cache_mib = w.cache_mib.unwrap_or(4096);
        if !(1..=1 << 32).contains(&cache_mib) {
            bad("cache_mib", format!("must be in 1..=2^32, got {cache_mib}"));
        }
        let read_ratio = w.read_ratio.unwrap_or(90);
        if !(0..=100).contains(&read_ratio) {
            bad("read_ratio", format!("must be a percentage, got {read_ratio}"));
        }
        let io_kib = w.io_kib.unwrap_or(1024);
        if !(4..=1 << 20).contains(&io_kib) || io_kib > cache_mib * 1024 {
            bad("io_kib", format!("must be in 4..=2^20 KiB and fit in the cache, got {io_kib}"));
        }
        let f = |v: Option<f64>, d: f64| v.unwrap_or(d);
        let (overhead_ns, compute_ms, io_ms, work_s, start_s) = (f(w.overhead_ns, 500.0), f(w.compute_ms, 20.0), f(w.io_ms, 5.0), f(w.work_s, 300.0), f(w.start_s, 0.0));
        for (key, v, lo) in [("overhead_ns", overhead_ns, 0.0), ("compute_ms", compute_ms, 0.01), ("io_ms", io_ms, 0.0), ("work_s", work_s, 0.001), ("start_s", start_s, 0.0)] {
            if !(v >= lo && v < 1e6) {
                bad(key, format!("must be in [{lo}, 1e6), got {v}"));
            }
        }
        if work_s / compute_ms * 1000.0 > 1e6 {
            bad("work_s", format!("work_s / compute_ms gives more than 1e6 I/O cycles per thread ({work_s} s / {compute_ms} ms)"));
        }
        (p.len() == start).then(|| XfsRepairSpec {
            kind: w.kind.clone(),
            threads: threads as usize,
            cache_mib: cache_mib as u64,
            read_ratio: read_ratio as u32,
            overhead_ns,
            compute_ms,
            io_ms,
            io_kib: io_kib as u64,
            work_s,
            start_s,
        })
    }

    pub fn build(&self, k: &mut Kernel, index: usize, rng: &mut Rng) {
        let pages = self.cache_mib * 256;
        let mm = new_mm(k, "xfs_repair", self.threads);
        // The buffers come from glibc malloc arenas that grow (brk, mprotect of a heap) with each
        // allocation, so a buffer's first touch is at the top of its VMA and the aligned 2 MiB
        // range is not inside it (thp_vma_suitable_order fails): base pages. Seed 003's own
        // counters have ~70% of xfs_repair's PTE updates outside PMDs (the rest are khugepaged
        // collapses, not modelled). Stand-in: the cache VMA takes no THP.
        let vma = k.mms[mm].mmap_anon(pages, VM_READ | VM_WRITE | VM_NOHUGEPAGE);
        let weights = vec![1.0 / pages as f64; pages as usize];
        let write_share = (100 - self.read_ratio) as f64 / 100.0;
        k.samplers.push(AccessSampler::new(mm, vma, weights.into(), write_share, self.overhead_ns, Rng::new(rng.next_u64(), 0)));
        let sampler = k.samplers.len() - 1;
        k.mms[mm].sampler = Some(sampler);
        let main = new_task(k, mm, "xfs_repair", index, vec![Op::Spawn, Op::Join], None, (self.start_s * 1e9) as u64);
        // accesses per CPU burst, at a nominal 100 ns memory latency
        let burst = (self.compute_ms * 1e6 / (self.overhead_ns + 100.0)).max(1.0) as u64;
        let cycles = (self.work_s * 1000.0 / self.compute_ms).ceil() as usize;
        let io = Op::DirectIo { pages: (self.io_kib / 4).max(1), ns: (self.io_ms * 1e6) as u64 };
        let access = Op::RandomAccess { sampler, warmup: burst, duration_ns: 0, overhead_ns: self.overhead_ns };
        let program: Vec<Op> = (0..cycles).flat_map(|_| [access, io]).collect();
        for _ in 0..self.threads {
            new_task(k, mm, "xfs_repair", index, program.clone(), Some(main), 0);
        }
    }
}

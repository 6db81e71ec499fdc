//! pmbench (Jisoo Yang; blakecaldwell/pmbench, LKP's wrapper): processes x threads making single
//! random accesses to a private anonymous map (workloads.md §4). Throughput, as LKP reports it,
//! is the sum over all threads of accesses per second of the timed loop.

use super::autonuma::{new_mm, new_task};
use super::random::AccessSampler;
use super::Op;
use crate::error::ScenarioProblem;
use crate::kernel::Kernel;
use crate::mm::types::{VM_READ, VM_WRITE};
use crate::scenario::raw::RawWorkload;
use crate::sim::rng::Rng;
use crate::topology::Topology;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Pattern {
    /// Every thread walks the set in page order from page 0, stride `shape` (1 only).
    Linear,
    Uniform,
    /// Box-Muller Gaussian, mean n/2, stdev `shape` pages; draws outside the set go to n/2.
    Normal,
    /// Irwin-Hall approximation: stdev about n/12, shape ignored.
    NormalIh,
    /// Bounded Pareto with alpha = shape.
    Pareto,
}

#[derive(Debug, Clone, Serialize)]
pub struct PmbenchSpec {
    pub kind: String,
    pub processes: usize,
    pub threads: usize,
    pub set_mib: u64,
    pub map_mib: u64,
    pub pattern: Pattern,
    pub shape: f64,
    pub read_ratio: u32,
    /// CPU affinity: bit n = node n.
    pub nodes: crate::topology::NodeMask,
    pub duration_s: f64,
    pub start_s: f64,
    /// Per-access cost besides the memory access (generator, timing), ns.
    pub overhead_ns: f64,
}

impl PmbenchSpec {
    pub fn resolve(w: &RawWorkload, i: usize, topo: &Topology, p: &mut Vec<ScenarioProblem>) -> Option<Self> {
        let keys = ["processes", "threads", "set_mib", "map_mib", "pattern", "shape", "read_ratio", "nodes", "duration_s", "start_s", "overhead_ns"];
        super::reject_keys(w, i, &keys, p);
        let start = p.len();
        let mut bad = |key: &str, msg: String| p.push(ScenarioProblem::new(format!("workload[{i}].{key}"), "invalid_value", msg));
        let processes = w.processes.unwrap_or(1);
        let threads = w.threads.unwrap_or(1);
        for (key, v) in [("processes", processes), ("threads", threads)] {
            if !(1..=4096).contains(&v) {
                bad(key, format!("must be in 1..=4096, got {v}"));
            }
        }
        // pmbench defaults: -s 128 -m 256
        let set_mib = w.set_mib.unwrap_or(128);
        let map_mib = w.map_mib.unwrap_or(set_mib.max(256));
        if !(1..=1 << 32).contains(&set_mib) || map_mib < set_mib || map_mib > 1 << 32 {
            bad("set_mib", format!("need 1 <= set_mib <= map_mib <= 2^32, got {set_mib} and {map_mib}"));
        }
        let pattern = match w.pattern.as_deref().unwrap_or("uniform") {
            "uniform" => Pattern::Uniform,
            "normal" => Pattern::Normal,
            "normal_ih" => Pattern::NormalIh,
            "pareto" => Pattern::Pareto,
            "linear" => Pattern::Linear,
            other => {
                bad("pattern", format!("unknown pattern `{other}`, expected uniform, normal, normal_ih, pareto or linear"));
                Pattern::Uniform
            }
        };
        let shape = w.shape.unwrap_or(1.00001);
        if !(shape > 0.0 && shape.is_finite()) {
            bad("shape", format!("must be positive, got {shape}"));
        } else if pattern == Pattern::Linear && shape as i64 != 1 {
            // pattern.c: linear_alloc_pattern_fn takes the stride as (int)shape
            bad("shape", format!("the linear pattern is modelled with stride 1 only (shape in [1, 2)), got {shape}"));
        }
        let read_ratio = w.read_ratio.unwrap_or(50);
        if !(0..=100).contains(&read_ratio) {
            bad("read_ratio", format!("must be a percentage, got {read_ratio}"));
        }
        let mut nodes: crate::topology::NodeMask = 0;
        for &n in w.nodes.as_deref().unwrap_or(&(0..topo.nr_nodes as i64).collect::<Vec<_>>()) {
            if n < 0 || n as usize >= topo.nr_nodes {
                bad("nodes", format!("node {n} does not exist (the machine has {} nodes)", topo.nr_nodes));
            } else {
                nodes |= 1 << n;
            }
        }
        if nodes == 0 {
            bad("nodes", "needs at least one node".into());
        } else if !(0..topo.nr_nodes).any(|n| nodes & (1 << n) != 0 && topo.has_cpu(n)) {
            bad("nodes", "the threads run on these nodes' CPUs (numactl --cpunodebind), and they have none".into());
        }
        let Some(duration_s) = w.duration_s else {
            bad("duration_s", "give the timed loop's duration (pmbench's positional argument)".into());
            return None;
        };
        let start_s = w.start_s.unwrap_or(0.0);
        let overhead_ns = w.overhead_ns.unwrap_or(30.0);
        if !(duration_s > 0.0 && duration_s < 1e6 && (0.0..1e6).contains(&start_s) && (0.0..1e6).contains(&overhead_ns)) {
            bad("duration_s", format!("duration_s in (0, 1e6), start_s and overhead_ns in [0, 1e6); got {duration_s}, {start_s}, {overhead_ns}"));
        }
        (p.len() == start).then(|| PmbenchSpec {
            kind: w.kind.clone(),
            processes: processes as usize,
            threads: threads as usize,
            set_mib: set_mib as u64,
            map_mib: map_mib as u64,
            pattern,
            shape,
            read_ratio: read_ratio as u32,
            nodes,
            duration_s,
            start_s,
            overhead_ns,
        })
    }

    /// Only the working set is ever touched.
    pub fn footprint_pages(&self) -> u64 {
        self.processes as u64 * self.set_mib * 256
    }

    /// p(k) for every page of the working set (pattern.c's generators, as distributions).
    pub fn weights(&self) -> Vec<f64> {
        let n = (self.set_mib * 256) as usize;
        let mut w: Vec<f64> = match self.pattern {
            // linear: every page once per pass
            Pattern::Uniform | Pattern::Linear => vec![1.0 / n as f64; n],
            Pattern::Normal | Pattern::NormalIh => {
                let sigma = if self.pattern == Pattern::Normal { self.shape } else { n as f64 / 12.0 };
                let mu = n as f64 / 2.0;
                let norm = 1.0 / (sigma * (2.0 * std::f64::consts::PI).sqrt());
                let mut v: Vec<f64> = (0..n).map(|k| norm * libm::exp(-((k as f64 + 0.5 - mu).powi(2)) / (2.0 * sigma * sigma))).collect();
                // out-of-range draws are clamped to the middle page
                let inside: f64 = v.iter().sum();
                v[n / 2] += (1.0 - inside).max(0.0);
                v
            }
            Pattern::Pareto => (0..n).map(|k| libm::pow(k as f64 + 1.0, -(self.shape + 1.0))).collect(),
        };
        let total: f64 = w.iter().sum();
        w.iter_mut().for_each(|x| *x /= total);
        w
    }

    /// Warm-up accesses per thread: setsize for normal-like patterns, 4 x setsize for uniform.
    fn warmup(&self) -> u64 {
        let pages = self.set_mib * 256;
        if self.pattern == Pattern::Uniform {
            4 * pages
        } else {
            pages
        }
    }

    pub fn build(&self, k: &mut Kernel, index: usize, rng: &mut Rng) {
        if self.pattern == Pattern::Linear {
            return self.build_linear(k, index);
        }
        let weights: std::sync::Arc<[f64]> = self.weights().into();
        let write_share = (100 - self.read_ratio) as f64 / 100.0;
        let ln_miss = AccessSampler::ln_miss_table(&weights);
        let allowed: Vec<bool> = k.topo.cpu_node.iter().map(|&n| self.nodes & (1 << n) != 0).collect();
        for _ in 0..self.processes {
            let mm = new_mm(k, "pmbench", self.threads);
            let vma = k.mms[mm].mmap_anon(self.map_mib * 256, VM_READ | VM_WRITE);
            k.samplers.push(AccessSampler::with_table(mm, vma, weights.clone(), Some(ln_miss.clone()), write_share, self.overhead_ns, Rng::new(rng.next_u64(), 0), true));
            let sampler = k.samplers.len() - 1;
            k.mms[mm].sampler = Some(sampler);
            let main = new_task(k, mm, "pmbench", index, vec![Op::Spawn, Op::Join], None, (self.start_s * 1e9) as u64);
            k.tasks[main].allowed = allowed.clone();
            for _ in 0..self.threads {
                let op = Op::RandomAccess { sampler, warmup: self.warmup(), duration_ns: (self.duration_s * 1e9) as u64, overhead_ns: self.overhead_ns };
                let t = new_task(k, mm, "pmbench", index, vec![op], Some(main), 0);
                k.tasks[t].allowed = allowed.clone();
            }
        }
    }
}

impl PmbenchSpec {
    /// The linear pattern is a walk, not a distribution: each thread crosses the set page by
    /// page (an access stream whose per-page cost is one access's latency plus the overhead).
    fn build_linear(&self, k: &mut Kernel, index: usize) {
        let allowed: Vec<bool> = k.topo.cpu_node.iter().map(|&n| self.nodes & (1 << n) != 0).collect();
        for _ in 0..self.processes {
            let mm = new_mm(k, "pmbench", self.threads);
            let vma = k.mms[mm].mmap_anon(self.map_mib * 256, VM_READ | VM_WRITE);
            let main = new_task(k, mm, "pmbench", index, vec![Op::Spawn, Op::Join], None, (self.start_s * 1e9) as u64);
            k.tasks[main].allowed = allowed.clone();
            for _ in 0..self.threads {
                let op = Op::LinearAccess { vma, npages: self.set_mib * 256, duration_ns: (self.duration_s * 1e9) as u64, overhead_ns: self.overhead_ns };
                let t = new_task(k, mm, "pmbench", index, vec![op], Some(main), 0);
                k.tasks[t].allowed = allowed.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pattern: Pattern, shape: f64) -> PmbenchSpec {
        PmbenchSpec { kind: "pmbench".into(), processes: 1, threads: 1, set_mib: 4, map_mib: 4, pattern, shape, read_ratio: 50, nodes: 1, duration_s: 1.0, start_s: 0.0, overhead_ns: 30.0 }
    }

    /// pattern.c: every generator is a probability distribution over the working set; normal
    /// is centred on n/2 with stdev `shape` pages (68% within one stdev), pareto favours low pages.
    #[test]
    fn pattern_weights_are_distributions() {
        for (p, shape) in [(Pattern::Uniform, 1.0), (Pattern::Normal, 100.0), (Pattern::NormalIh, 1.0), (Pattern::Pareto, 1.161)] {
            let w = spec(p, shape).weights();
            assert_eq!(w.len(), 1024);
            assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{p:?}");
        }
        let w = spec(Pattern::Normal, 100.0).weights();
        let one_sigma: f64 = w[412..612].iter().sum();
        assert!((one_sigma - 0.683).abs() < 0.01, "{one_sigma}");
        let w = spec(Pattern::Pareto, 1.161).weights();
        assert!(w[0] > w[10] && w[10] > w[1000]);
        // the default shape puts almost every access on the middle page, as pmbench's man page warns
        assert!(spec(Pattern::Normal, 1.00001).weights()[512] > 0.35);
    }
}

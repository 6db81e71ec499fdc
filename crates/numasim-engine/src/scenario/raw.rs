//! What the user wrote: every field optional, unknown keys rejected.

use crate::cost::CostProfile;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    pub seed: Option<u64>,
    pub machine: Option<RawMachine>,
    pub kernel: Option<RawKernel>,
    pub workload: Option<Vec<RawWorkload>>,
    pub run: Option<RawRun>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum PerNode<T> {
    Same(T),
    Each(Vec<T>),
}

impl<T: Clone> PerNode<T> {
    pub fn expand(&self, nodes: usize) -> Option<Vec<T>> {
        match self {
            PerNode::Same(v) => Some(vec![v.clone(); nodes]),
            PerNode::Each(v) if v.len() == nodes => Some(v.clone()),
            PerNode::Each(_) => None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMachine {
    pub profile: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub nodes: Option<i64>,
    pub cpus_per_node: Option<PerNode<i64>>,
    pub smt: Option<i64>,
    pub memory_gib_per_node: Option<PerNode<f64>>,
    pub distances: Option<Vec<Vec<i64>>>,
    /// Per node: "dram", or "kmem" (memory onlined by dax/kmem: PMEM or CXL).
    pub memory_type: Option<PerNode<String>>,
    /// Firmware describes memory performance (ACPI HMAT), from the cost profile.
    pub hmat: Option<bool>,
    pub fragmentation: Option<f64>,
    pub host_cores: Option<f64>,
    pub steal_in_runtime: Option<f64>,
    pub tick_sys_share: Option<f64>,
    pub cost: Option<CostProfile>,
    /// Where each constant comes from ("spec: ...", "measured: ...", "derived: EXPERIMENT
    /// ...", "assumed: ..."): documentation, checked but not used by the simulation.
    pub source: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKernel {
    pub version: Option<String>,
    pub numa_balancing: Option<NumaBalancingRaw>,
    pub hz: Option<i64>,
    pub sysctl: Option<RawSysctl>,
    pub features: Option<BTreeMap<String, bool>>,
    pub variants: Option<BTreeMap<String, String>>,
    pub thp: Option<RawThp>,
}

/// `kernel.numa_balancing`: a boolean, or the kernel's bit field (0-3).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum NumaBalancingRaw {
    Bool(bool),
    Mode(i64),
}

/// /sys/kernel/mm/transparent_hugepage/: `enabled`, and `sizes` = hugepages-<size>kB/enabled.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawThp {
    pub enabled: Option<String>,
    pub sizes: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSysctl {
    pub numa_balancing_scan_delay_ms: Option<i64>,
    pub numa_balancing_scan_period_min_ms: Option<i64>,
    pub numa_balancing_scan_period_max_ms: Option<i64>,
    pub numa_balancing_scan_size_mb: Option<i64>,
    #[serde(rename = "numa_balancing_promote_rate_limit_MBps")]
    pub numa_balancing_promote_rate_limit_mbps: Option<i64>,
    pub numa_balancing_hot_threshold_ms: Option<i64>,
    pub demotion_enabled: Option<bool>,
    pub watermark_scale_factor: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorkload {
    pub kind: String,
    pub threads: Option<i64>,
    pub size_mib: Option<i64>,
    pub passes: Option<i64>,
    pub start_s: Option<f64>,
    pub size_gib: Option<f64>,
    pub node: Option<i64>,
    pub free_at_s: Option<f64>,
    pub target: Option<i64>,
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub loops: Option<i64>,
    pub interval_s: Option<f64>,
    pub processes: Option<i64>,
    pub set_mib: Option<i64>,
    pub map_mib: Option<i64>,
    pub pattern: Option<String>,
    pub shape: Option<f64>,
    pub read_ratio: Option<i64>,
    pub nodes: Option<Vec<i64>>,
    pub duration_s: Option<f64>,
    pub overhead_ns: Option<f64>,
    pub first_mib: Option<i64>,
    pub cache_mib: Option<i64>,
    pub compute_ms: Option<f64>,
    pub io_ms: Option<f64>,
    pub io_kib: Option<i64>,
    pub work_s: Option<f64>,
    pub touch_node: Option<i64>,
    pub run_node: Option<i64>,
    pub local_threads: Option<i64>,
    pub madvise: Option<String>,
    pub mapping: Option<String>,
    pub vcpus: Option<i64>,
    pub memory_mib: Option<i64>,
    pub pinned_fraction: Option<f64>,
    pub image: Option<String>,
    /// `sampler`: its CPU time per sample, and per numa_maps read and how often.
    pub busy_ms: Option<f64>,
    pub maps_ms_per_gib: Option<f64>,
    pub maps_interval_s: Option<f64>,
    /// `program`: its buffers and processes.
    pub buffer: Option<Vec<RawBuffer>>,
    pub process: Option<Vec<RawProcess>>,
}

/// A `program`'s `[[workload.buffer]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBuffer {
    pub size_mib: Option<i64>,
    pub mapping: Option<String>,
    pub madvise: Option<String>,
}

/// A `program`'s `[[workload.process]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProcess {
    pub parent: Option<i64>,
    pub node: Option<i64>,
    pub cpus: Option<Vec<i64>>,
    pub main: Option<Vec<RawOp>>,
    pub thread: Option<Vec<RawThread>>,
}

/// A `program`'s `[[workload.process.thread]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawThread {
    pub count: Option<i64>,
    pub node: Option<i64>,
    pub cpus: Option<Vec<i64>>,
    pub ops: Option<Vec<RawOp>>,
}

/// One operation of a `program` thread: `op` and the keys of its kind.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOp {
    pub op: String,
    pub buffer: Option<i64>,
    pub offset_mib: Option<i64>,
    pub size_mib: Option<i64>,
    pub stride: Option<i64>,
    pub passes: Option<i64>,
    pub duration_s: Option<f64>,
    pub mode: Option<String>,
    pub nodes: Option<Vec<i64>>,
    pub node: Option<i64>,
    pub cpus: Option<Vec<i64>>,
}

impl RawOp {
    /// The keys given besides `op`, by name.
    pub fn given(&self) -> Vec<&'static str> {
        let keys = [
            ("buffer", self.buffer.is_some()),
            ("offset_mib", self.offset_mib.is_some()),
            ("size_mib", self.size_mib.is_some()),
            ("stride", self.stride.is_some()),
            ("passes", self.passes.is_some()),
            ("duration_s", self.duration_s.is_some()),
            ("mode", self.mode.is_some()),
            ("nodes", self.nodes.is_some()),
            ("node", self.node.is_some()),
            ("cpus", self.cpus.is_some()),
        ];
        keys.iter().filter(|k| k.1).map(|k| k.0).collect()
    }
}

impl RawWorkload {
    /// The optional keys given, by name.
    pub fn given(&self) -> Vec<&'static str> {
        let keys = [
            ("threads", self.threads.is_some()),
            ("size_mib", self.size_mib.is_some()),
            ("passes", self.passes.is_some()),
            ("start_s", self.start_s.is_some()),
            ("size_gib", self.size_gib.is_some()),
            ("node", self.node.is_some()),
            ("free_at_s", self.free_at_s.is_some()),
            ("target", self.target.is_some()),
            ("from", self.from.is_some()),
            ("to", self.to.is_some()),
            ("loops", self.loops.is_some()),
            ("interval_s", self.interval_s.is_some()),
            ("busy_ms", self.busy_ms.is_some()),
            ("maps_ms_per_gib", self.maps_ms_per_gib.is_some()),
            ("maps_interval_s", self.maps_interval_s.is_some()),
            ("processes", self.processes.is_some()),
            ("set_mib", self.set_mib.is_some()),
            ("map_mib", self.map_mib.is_some()),
            ("pattern", self.pattern.is_some()),
            ("shape", self.shape.is_some()),
            ("read_ratio", self.read_ratio.is_some()),
            ("nodes", self.nodes.is_some()),
            ("duration_s", self.duration_s.is_some()),
            ("overhead_ns", self.overhead_ns.is_some()),
            ("first_mib", self.first_mib.is_some()),
            ("cache_mib", self.cache_mib.is_some()),
            ("compute_ms", self.compute_ms.is_some()),
            ("io_ms", self.io_ms.is_some()),
            ("io_kib", self.io_kib.is_some()),
            ("work_s", self.work_s.is_some()),
            ("touch_node", self.touch_node.is_some()),
            ("run_node", self.run_node.is_some()),
            ("local_threads", self.local_threads.is_some()),
            ("madvise", self.madvise.is_some()),
            ("mapping", self.mapping.is_some()),
            ("vcpus", self.vcpus.is_some()),
            ("memory_mib", self.memory_mib.is_some()),
            ("pinned_fraction", self.pinned_fraction.is_some()),
            ("buffer", self.buffer.is_some()),
            ("process", self.process.is_some()),
        ];
        keys.iter().filter(|k| k.1).map(|k| k.0).collect()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    pub sample_interval_ms: Option<i64>,
    pub max_sim_s: Option<f64>,
    pub placement_interval_ms: Option<i64>,
    pub numa_maps_interval_ms: Option<i64>,
    pub interleave_max_threads: Option<i64>,
    pub trace_faults: Option<bool>,
    pub trace: Option<bool>,
}

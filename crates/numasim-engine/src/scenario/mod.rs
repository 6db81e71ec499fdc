//! Scenarios: TOML text -> raw options (unknown keys rejected) -> resolved [`Scenario`].
//!
//! Two layers as in ruff: `raw` mirrors what the user wrote, `resolve` checks everything at once
//! and returns every problem with its location.

mod profiles;
pub(crate) mod raw;
mod resolve;
mod resolve_machine;

pub use profiles::{machine_profile_names, machine_profile_toml};
pub use resolve::parse_scenario;

use crate::cost::CostProfile;
use crate::features::FeatureSet;
use crate::topology::Topology;
use crate::workload::WorkloadSpec;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Scenario {
    pub seed: u64,
    pub machine: Machine,
    pub kernel: KernelConfig,
    pub workloads: Vec<WorkloadSpec>,
    /// Each workload's process image (workload/image.rs).
    pub images: Vec<crate::workload::image::ImagePreset>,
    pub run: RunConfig,
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub name: String,
    pub description: String,
    pub topology: Topology,
    /// Chance that a no-compaction allocation of a PMD-sized block finds none free on a node
    /// (smaller orders proportionally less); 0 = free memory is never fragmented.
    pub fragmentation: f64,
    /// A virtual machine's vCPUs share this many host cores (None: bare metal): with more
    /// vCPUs busy, each gets that share of every tick (the rest is stolen by the host).
    /// Fractional where measured (`numasim calibrate`: all vCPUs' store rate over one's).
    pub host_cores: Option<f64>,
    /// The share of that stolen time the guest counts as the running task's runtime: 1 where
    /// its sched_clock runs on across the host's preemption (a stable TSC), less where the
    /// clock is held to the tick (kernel/sched/clock.c, an unstable TSC). Measured by
    /// `numasim calibrate`; 1 by default.
    pub steal_in_runtime: f64,
    /// The share of a busy CPU's time that its own kernel work takes (the timer tick and the
    /// softirqs it raises): inside the measured per-page costs, so it takes no time of its own
    /// in the model, and reported as system time. 0 by default (not reported).
    pub tick_sys_share: f64,
    /// Per node, who onlined its memory (mm/memory_tiers.rs); all DRAM by default.
    #[serde(skip_serializing_if = "crate::mm::memory_tiers::all_dram")]
    pub memory_type: Vec<crate::mm::memory_tiers::MemoryType>,
    /// Firmware gives memory latency and bandwidth (ACPI HMAT), taken from the cost profile.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hmat: bool,
    pub cost: CostProfile,
}

/// The kernel side: `kernel.numa_balancing`, CONFIG_HZ, the scan sysctls and named features.
#[derive(Debug, Clone, Serialize)]
pub struct KernelConfig {
    /// The release the features start from (`kernels::KERNEL_VERSIONS`); None: the default.
    pub version: Option<String>,
    pub numa_balancing: bool,
    /// `kernel.numa_balancing` as the kernel's bit field, and the memory-tiering knobs.
    #[serde(skip_serializing_if = "Tiering::is_default")]
    pub tiering: Tiering,
    pub hz: u32,
    pub sysctl: Sysctl,
    /// Feature name -> on/off, in the order of `features::FEATURES`.
    pub features: FeatureSet,
    /// The variant of every mechanism (`variants::MECHANISMS`).
    pub variants: crate::variants::Variants,
    /// Transparent huge pages and mTHP sizes.
    pub thp: crate::mm::huge_memory::ThpConfig,
}

/// /sys/kernel/debug/sched/numa_balancing/* (sysctl kernel.numa_balancing_* before v5.13).
#[derive(Debug, Clone, Serialize)]
pub struct Sysctl {
    pub numa_balancing_scan_delay_ms: u32,
    pub numa_balancing_scan_period_min_ms: u32,
    pub numa_balancing_scan_period_max_ms: u32,
    pub numa_balancing_scan_size_mb: u32,
}

impl Default for Sysctl {
    // kernel/sched/fair.c: sysctl_numa_balancing_scan_* defaults
    fn default() -> Self {
        Sysctl { numa_balancing_scan_delay_ms: 1000, numa_balancing_scan_period_min_ms: 1000, numa_balancing_scan_period_max_ms: 60000, numa_balancing_scan_size_mb: 256 }
    }
}

/// kernel.numa_balancing bits (include/linux/sched/sysctl.h).
pub const NUMA_BALANCING_NORMAL: u8 = 1;
pub const NUMA_BALANCING_MEMORY_TIERING: u8 = 2;

/// `kernel.numa_balancing` (0-3) and the memory-tiering knobs (tiering.md §2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tiering {
    pub mode: u8,
    /// kernel.numa_balancing_promote_rate_limit_MBps (6.1+), MB/s per target node.
    pub promote_rate_limit_mbps: u64,
    /// debugfs sched/numa_balancing/hot_threshold_ms (6.1+).
    pub hot_threshold_ms: u32,
    /// /sys/kernel/mm/numa/demotion_enabled (5.15+).
    pub demotion_enabled: bool,
    /// vm.watermark_scale_factor, in 1/10000 of a zone.
    pub watermark_scale_factor: u32,
}

impl Default for Tiering {
    fn default() -> Self {
        Tiering { mode: NUMA_BALANCING_NORMAL, promote_rate_limit_mbps: 65536, hot_threshold_ms: 1000, demotion_enabled: false, watermark_scale_factor: 10 }
    }
}

impl Tiering {
    /// Only `kernel.numa_balancing` = 0 or 1 and default knobs: nothing to echo.
    pub fn is_default(&self) -> bool {
        self.mode <= NUMA_BALANCING_NORMAL && *self == Tiering { mode: self.mode, ..Tiering::default() }
    }
    pub fn tiering(&self) -> bool {
        self.mode & NUMA_BALANCING_MEMORY_TIERING != 0
    }
    pub fn normal(&self) -> bool {
        self.mode & NUMA_BALANCING_NORMAL != 0
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RunConfig {
    pub sample_interval_ms: u64,
    pub max_sim_s: f64,
    /// Sampling of the per-task node series and the page-placement map (0: off).
    pub placement_interval_ms: u64,
    /// Real-kernel runs only: how often the runner reads the processes' numa_maps (None: at
    /// the placement interval). The simulator's memory placement costs it nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_maps_interval_ms: Option<u64>,
    /// Processes of at most this many threads (every thread they have, main included) run the threads that share pages
    /// interleaved in simulated time (sim/interleave.rs; 0 or 1: none).
    pub interleave_max_threads: usize,
    /// Count every hint fault by thread, 100 ms and kind (result `fault_kinds`), as
    /// `numasim validate --trace-faults` does in the VM.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub trace_faults: bool,
    /// Record the kernel's tracepoints (result `trace`: scan windows, numa_group joins,
    /// preferred-node changes, migrations and TLB-flush rounds per 10 ms; tracepoints.rs).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub trace: bool,
}
